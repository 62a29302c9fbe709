// Drive mtcute's browser package (npm @mtcute/web, layer 221) in headless Chromium
// against telesrv's WebSocket listener, with no relay; run with node (ES module).
//
// argv[2]: JSON {modules, chromium, url, ...the page's args (mtcute_browser_page.mjs)},
// where `modules` is the node_modules directory holding @mtcute/web, esbuild and
// playwright-core (.ci/client-browser installs them) and `chromium` the browser to
// launch (Debian's, so playwright downloads none). The page script is bundled here with
// esbuild and served, with mtcute's wasm, by a static HTTP server on 127.0.0.1 (a port
// the system picks): a loopback page is a secure context, which WebCrypto needs, and
// may open a loopback WebSocket, which Chromium's local network access checks refuse to
// a page of unknown address (one Playwright's request interception fulfils). The page's
// console goes to stderr; its steps (sign in, send to `peer`, a message from it) and the
// WebSocket connections the page opened are JSON lines on stdout.
import fs from 'node:fs/promises'
import http from 'node:http'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const ARGS = JSON.parse(process.argv[2])
const HERE = path.dirname(fileURLToPath(import.meta.url))
const load = (file) => import(pathToFileURL(path.join(ARGS.modules, file)).href)
const esbuild = (await load('esbuild/lib/main.js')).default
const { chromium } = (await load('playwright-core/index.js')).default

function say(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n')
}

async function bundle() {
  const result = await esbuild.build({
    entryPoints: [path.join(HERE, 'mtcute_browser_page.mjs')],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    nodePaths: [ARGS.modules],
    write: false,
    logLevel: 'warning',
  })
  return result.outputFiles[0].contents
}

const PAGE = '<!doctype html><meta charset="utf-8"><title>mtcute</title><link rel="icon" href="data:,"><script type="module" src="/bundle.js"></script>'

// The page, the bundle and mtcute's wasm (which it fetches next to the bundle).
async function files() {
  const wasm = path.join(ARGS.modules, '@mtcute', 'wasm')
  return new Map([
    ['/', ['text/html', Buffer.from(PAGE)]],
    ['/bundle.js', ['text/javascript', Buffer.from(await bundle())]],
    ['/mtcute.wasm', ['application/wasm', await fs.readFile(path.join(wasm, 'mtcute.wasm'))]],
    ['/mtcute-simd.wasm', ['application/wasm', await fs.readFile(path.join(wasm, 'mtcute-simd.wasm'))]],
  ])
}

async function serve(content) {
  const server = http.createServer((req, res) => {
    const file = content.get(new URL(req.url, 'http://127.0.0.1').pathname)
    if (!file) {
      res.writeHead(404).end('not found')
      return
    }
    res.writeHead(200, { 'Content-Type': file[0], 'Content-Length': file[1].length }).end(file[1])
  })
  await new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', resolve)
  })
  return server
}

async function main() {
  const site = await serve(await files())
  const origin = `http://127.0.0.1:${site.address().port}`
  const browser = await chromium.launch({
    executablePath: ARGS.chromium,
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage'],
  })
  try {
    const page = await browser.newPage()
    page.on('console', (msg) => process.stderr.write(`[page ${msg.type()}] ${msg.text()}\n`))
    page.on('pageerror', (err) => process.stderr.write(`[page error] ${err.stack || err}\n`))
    const sockets = []
    page.on('websocket', (ws) => {
      const socket = { url: ws.url(), sent: 0, received: 0 }
      sockets.push(socket)
      ws.on('framesent', () => socket.sent++)
      ws.on('framereceived', () => socket.received++)
    })
    await page.exposeFunction('say', say)
    await page.goto(`${origin}/`)
    await page.waitForFunction(() => typeof globalThis.runClient === 'function')
    const { modules, chromium: _, ...pageArgs } = ARGS
    await page.evaluate((args) => globalThis.runClient(args), pageArgs)
    say({ step: 'closed', sockets })
  } finally {
    await browser.close()
    site.close()
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(String(err && err.stack ? err.stack : err) + '\n')
    process.exit(1)
  },
)
