// Drive mtcute (npm @mtcute/node, layer 227) against telesrv; run with node (ES module).
//
// argv[2]: JSON {modules, host, port, n, e, fingerprint, phone, code, peer, name}, where
// `modules` is the node_modules directory mtcute is installed in. The two runtime
// patches this family needs: the server's RSA key added to mtcute's key index, and
// the server's address as the client's default DC (`defaultDcs`). Prints one JSON line
// per step on stdout. Steps: sign in, send to `peer` (a username), wait for a message
// from it, history, dialogs, edit, then (after a line on stdin: the test has seen the
// edit) delete.
import path from 'node:path'
import readline from 'node:readline'
import { pathToFileURL } from 'node:url'

const ARGS = JSON.parse(process.argv[2])
// mtcute is installed outside this directory, so its modules load by file URL.
const load = (file) => import(pathToFileURL(path.join(ARGS.modules, '@mtcute', file)).href)
const { TelegramClient } = await load('node/index.js')
const { MemoryStorage } = await load('core/index.js')
// mtcute looks a key up by the unpadded hex of its fingerprint, so the key goes into
// its index directly (addPublicKey from '@mtcute/core/utils.js' stores the padded
// form, which misses a fingerprint below 2**60).
const { __publicKeyIndex } = await load('core/tl/binary/rsa-keys.js')

function say(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n')
}

function hex(value) {
  const s = BigInt(value).toString(16)
  return s.length % 2 ? '0' + s : s
}

function patchKey() {
  const fingerprint = BigInt.asUintN(64, BigInt(ARGS.fingerprint)).toString(16)
  __publicKeyIndex[fingerprint] = {
    modulus: hex(ARGS.n),
    exponent: hex(ARGS.e),
    fingerprint,
    old: false,
  }
}

async function main() {
  patchKey()
  const dc = { id: 2, ipAddress: ARGS.host, port: Number(ARGS.port) }
  const tg = new TelegramClient({
    apiId: 1,
    apiHash: '0'.repeat(32),
    storage: new MemoryStorage(),
    defaultDcs: { main: dc, media: { ...dc, mediaOnly: true } },
    logLevel: Number(ARGS.logLevel || 2),
  })
  // mtcute logs to stdout, which carries the steps; its warnings and errors go to
  // stderr instead, as plain "[WRN] [tag] text" lines the test reads. Its debug lines
  // are kept, unformatted, in a ring that is written out only when a step fails:
  // formatting and writing each of them would slow the client down enough to change
  // the timing a failure depends on.
  const LEVELS = ['', 'ERR', 'WRN', 'INF', 'DBG', 'VRB']
  const show = (value) => {
    if (typeof value !== 'object' || value === null || value instanceof Error) return String(value)
    return String(JSON.stringify(value, (_k, v) => (typeof v === 'bigint' ? v.toString() : v)))
  }
  // Arguments past the placeholders are shown too: mtcute logs "unhandled error:" with
  // the error as such an argument.
  const format = (level, tag, fmt, args) => {
    let i = 0
    const text = fmt.replace(/%[a-zA-Z]/g, () => show(args[i++]))
    const rest = args.slice(i).map(show)
    return `[${LEVELS[level]}] [${tag}] ${[text, ...rest].join(' ')}\n`
  }
  const ring = []
  tg.log.mgr.level = Math.max(Number(ARGS.logLevel || 2), 4)
  tg.log.mgr.handler = (_color, level, tag, fmt, args) => {
    if (level <= Number(ARGS.logLevel || 2)) process.stderr.write(format(level, tag, fmt, args))
    else {
      ring.push([Date.now(), level, tag, fmt, args])
      if (ring.length > 3000) ring.shift()
    }
  }
  const dumpRing = () => {
    process.stderr.write(`--- the client's last ${ring.length} debug lines ---\n`)
    for (const [at, level, tag, fmt, args] of ring) {
      process.stderr.write(`${at} ${format(level, tag, fmt, args)}`)
    }
  }
  let gotMessage
  const incoming = new Promise((resolve) => {
    gotMessage = resolve
  })
  tg.onNewMessage.add((msg) => {
    if (!msg.isOutgoing) gotMessage(msg)
  })
  const me = await tg.start({
    phone: ARGS.phone,
    code: ARGS.code,
    codeSentCallback: () => {},
  })
  say({ step: 'ready', me: me.id })
  const peer = await tg.resolvePeer(ARGS.peer)
  const sent = await tg.sendText(peer, 'hello from ' + ARGS.name)
  say({ step: 'sent', id: sent.id, text: sent.text, chat: sent.chat.id, outgoing: sent.isOutgoing })
  const got = await withTimeout(incoming, 30000, 'no incoming message').catch(async (err) => {
    dumpRing()
    process.stderr.write(`state asked now: ${JSON.stringify(await tg.call({ _: 'updates.getState' }))}\n`)
    throw err
  })
  say({ step: 'received', text: got.text, sender: got.sender.id, chat: got.chat.id })
  const history = (await tg.getHistory(peer)).map((m) => m.text)
  const dialogs = []
  for await (const d of tg.iterDialogs()) dialogs.push([d.peer.id, d.lastMessage ? d.lastMessage.id : null])
  say({ step: 'listed', history, dialogs })
  const edited = await tg.editMessage({ chatId: peer, message: sent.id, text: 'edited by ' + ARGS.name })
  say({ step: 'edited', text: edited.text })
  await nextLine()
  await tg.deleteMessagesById(peer, [sent.id])
  const after = (await tg.getHistory(peer)).map((m) => m.text)
  say({ step: 'deleted', count: 1, history: after })
  await tg.destroy()
}

function withTimeout(promise, ms, what) {
  return Promise.race([
    promise,
    new Promise((_, reject) => setTimeout(() => reject(new Error(what)), ms).unref()),
  ])
}

function nextLine() {
  return new Promise((resolve) => {
    const rl = readline.createInterface({ input: process.stdin })
    rl.once('line', () => {
      rl.close()
      resolve()
    })
  })
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(String(err && err.stack ? err.stack : err) + '\n')
    process.exit(1)
  },
)
