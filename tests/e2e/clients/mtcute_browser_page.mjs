// The page side of the browser test: mtcute's browser package (npm @mtcute/web, layer
// 221) in Chromium, bundled by mtcute_browser_driver.mjs with esbuild. It defines
// `globalThis.runClient(args)`; the driver calls it and relays what it reports through
// `globalThis.say` (a function the driver exposes) as JSON lines on its stdout.
//
// args: {url, n, e, fingerprint, phone, code, peer, name, logLevel}. The two runtime
// patches the Node test needs, done the browser's way: the server's RSA key goes into
// mtcute's key index, and the transport dials `url` (ws://HOST:PORT/apiws, telesrv's
// WebSocket listener) for every DC, as mtcute's own WebSocketTransport maps a DC id
// to wss://<subdomain>.web.telegram.org/apiws. Storage is in memory.
import { MemoryStorage, TelegramClient, WebPlatform, WebSocketTransport } from '@mtcute/web'
import { connectWs } from '@fuman/net'
// mtcute looks a key up by the unpadded hex of its fingerprint, so the key goes into
// the index directly (addPublicKey stores the padded form, which misses a fingerprint
// below 2**60).
import { __publicKeyIndex } from '@mtcute/tl/binary/rsa-keys.js'

class ServerTransport extends WebSocketTransport {
  constructor(url) {
    super()
    this.url = url
  }

  async connect(dc) {
    return connectWs({ url: this.url, implementation: WebSocket, protocols: 'binary' })
  }
}

// mtcute's web logger formats for the devtools console (%c colours); this one writes
// plain lines ("[WRN] [tag] text") that the driver copies to its stderr, up to the
// level asked for. The debug lines are kept, unformatted, in a ring written out only
// when a step fails: writing each of them would change the timing a failure depends on.
const LEVELS = ['', 'ERR', 'WRN', 'INF', 'DBG', 'VRB']

function show(value) {
  return typeof value === 'object' && value !== null && !(value instanceof Error)
    ? safeJson(value)
    : String(value)
}

// Arguments past the placeholders are shown too: mtcute logs "unhandled error:" with the
// error as such an argument.
function format(level, tag, fmt, args) {
  let i = 0
  const text = fmt.replace(/%[a-zA-Z]/g, () => show(args[i++]))
  const rest = args.slice(i).map(show)
  return `[${LEVELS[level]}] [${tag}] ${[text, ...rest].join(' ')}`
}

class PagePlatform extends WebPlatform {
  constructor(shown) {
    super()
    this.shown = shown
    this.ring = []
  }

  log(_color, level, tag, fmt, args) {
    if (level <= this.shown) console.log(format(level, tag, fmt, args))
    else {
      this.ring.push([Date.now(), level, tag, fmt, args])
      if (this.ring.length > 3000) this.ring.shift()
    }
  }

  dumpRing() {
    console.log(`--- the client's last ${this.ring.length} debug lines ---`)
    for (const [at, level, tag, fmt, args] of this.ring) console.log(`${at} ${format(level, tag, fmt, args)}`)
  }
}

function safeJson(value) {
  try {
    return JSON.stringify(value, (_k, v) => (typeof v === 'bigint' ? String(v) : v))
  } catch {
    return String(value)
  }
}

function hex(value) {
  const s = BigInt(value).toString(16)
  return s.length % 2 ? '0' + s : s
}

function withTimeout(promise, ms, what) {
  return Promise.race([promise, new Promise((_, reject) => setTimeout(() => reject(new Error(what)), ms))])
}

globalThis.runClient = async (args) => {
  const say = globalThis.say
  const fingerprint = BigInt.asUintN(64, BigInt(args.fingerprint)).toString(16)
  __publicKeyIndex[fingerprint] = { modulus: hex(args.n), exponent: hex(args.e), fingerprint, old: false }
  // The transport dials args.url whatever the DC; its address here is for mtcute's logs.
  const { hostname, port } = new URL(args.url)
  const dc = { id: 2, ipAddress: hostname, port: Number(port) }
  const platform = new PagePlatform(Number(args.logLevel || 1))
  const tg = new TelegramClient({
    apiId: 1,
    apiHash: '0'.repeat(32),
    storage: new MemoryStorage(),
    defaultDcs: { main: dc, media: { ...dc, mediaOnly: true } },
    transport: new ServerTransport(args.url),
    platform,
    logLevel: Math.max(Number(args.logLevel || 1), 4),
  })
  let gotMessage
  const incoming = new Promise((resolve) => {
    gotMessage = resolve
  })
  tg.onNewMessage.add((msg) => {
    if (!msg.isOutgoing) gotMessage(msg)
  })
  try {
    const me = await tg.start({ phone: args.phone, code: args.code, codeSentCallback: () => {} })
    await say({ step: 'ready', me: me.id, agent: navigator.userAgent })
    const peer = await tg.resolvePeer(args.peer)
    const sent = await tg.sendText(peer, 'hello from ' + args.name)
    await say({ step: 'sent', id: sent.id, text: sent.text, chat: sent.chat.id, outgoing: sent.isOutgoing })
    const got = await withTimeout(incoming, 30000, 'no incoming message').catch(async (err) => {
      platform.dumpRing()
      console.log(`state asked now: ${safeJson(await tg.call({ _: 'updates.getState' }))}`)
      throw err
    })
    await say({ step: 'received', text: got.text, sender: got.sender.id, chat: got.chat.id })
  } finally {
    await tg.destroy()
  }
}
