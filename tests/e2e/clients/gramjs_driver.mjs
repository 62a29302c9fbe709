// Drive GramJS (npm `telegram` 2.26.22, layer 198, the library inside Telegram Web A)
// against telesrv over TCP; run with node (ES module).
//
// argv[2]: JSON {modules, host, port, n, e, fingerprint, phone, code, peer, name, photo,
// logLevel}, where `modules` is the node_modules directory GramJS is installed in and
// `photo` a JPEG file to send. The two runtime patches the library needs:
// - the server's RSA key in GramJS's key map (`_serverKeys` of crypto/RSA, keyed by the
//   signed decimal fingerprint, as resPQ's fingerprints read);
// - the server's address: `session.setDC(2, host, port)`, and a TCPFull connection that
//   dials that port (GramJS on Node dials port 80 whatever the session says, and its
//   upload and download senders take the address from help.getConfig with port 443).
//
// One JSON line per step on stdout; GramJS's own log goes to stderr. Steps: sign in
// (ready), send a text to `peer` (a username) (sent), a text from it live (received),
// history and dialogs (listed), a photo to it, downloaded back (photo_sent), a photo
// from it live, downloaded (photo_received), then offline: updates.getState,
// disconnect (offline); after a JSON line on stdin (the test has sent messages
// meanwhile) reconnect and fetch what was missed with updates.getDifference
// (caught_up).
import { createHash } from 'node:crypto'
import { createRequire } from 'node:module'
import path from 'node:path'
import readline from 'node:readline'
import util from 'node:util'

const ARGS = JSON.parse(process.argv[2])

// GramJS logs with console.log; stdout carries only the steps.
console.log = (...args) => process.stderr.write(util.format(...args) + '\n')

// GramJS is CommonJS, installed outside this directory.
const require = createRequire(path.join(ARGS.modules, 'telegram', 'package.json'))
const { TelegramClient, Api } = require('telegram')
const { MemorySession } = require('telegram/sessions')
const { NewMessage } = require('telegram/events')
const { ConnectionTCPFull } = require('telegram/network')
const { LAYER } = require('telegram/tl/AllTLObjects')
const RSA = require('telegram/crypto/RSA')
const bigInt = require('big-integer')
const { version } = require('telegram/package.json')

function say(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n')
}

function num(value) {
  return value === undefined || value === null ? null : Number(value.toString())
}

function sha256(buffer) {
  return createHash('sha256').update(buffer).digest('hex')
}

function patchKey() {
  const fingerprint = BigInt.asIntN(64, BigInt(ARGS.fingerprint)).toString()
  RSA._serverKeys.set(fingerprint, { n: bigInt(ARGS.n), e: Number(ARGS.e) })
}

// Every connection GramJS opens (main, upload, download) goes to the server.
class ToServer extends ConnectionTCPFull {
  constructor(params) {
    super({ ...params, ip: ARGS.host, port: Number(ARGS.port) })
  }
}

// The largest rendition of a photo: [w, h].
function largest(photo) {
  let best = null
  for (const size of photo.sizes || []) {
    if (typeof size.w !== 'number') continue
    if (!best || size.w * size.h > best[0] * best[1]) best = [size.w, size.h]
  }
  return best
}

// Incoming messages, in order of arrival.
const inbox = []
let wake = null
function nextIncoming(ms) {
  if (inbox.length) return Promise.resolve(inbox.shift())
  return withTimeout(
    new Promise((resolve) => {
      wake = () => {
        wake = null
        resolve(inbox.shift())
      }
    }),
    ms,
    'no incoming message within ' + ms + ' ms',
  )
}

async function main() {
  patchKey()
  // Not a StringSession: its save() writes the port as a signed 16-bit number, which
  // fails for a port above 32767 (the tests' port is any free one).
  const session = new MemorySession()
  session.setDC(2, ARGS.host, Number(ARGS.port))
  const client = new TelegramClient(session, 1, '0'.repeat(32), {
    connection: ToServer,
    connectionRetries: 3,
    autoReconnect: false,
  })
  client.setLogLevel(ARGS.logLevel || 'info')
  client.addEventHandler(
    (event) => {
      inbox.push(event.message)
      if (wake) wake()
    },
    new NewMessage({ incoming: true }),
  )
  let authError = null
  await client.start({
    phoneNumber: async () => ARGS.phone,
    phoneCode: async () => ARGS.code,
    onError: async (err) => {
      authError = err
      return true // stop: the error is reported below
    },
  }).catch((err) => {
    throw authError || err
  })
  const me = await client.getMe()
  say({ step: 'ready', me: num(me.id), version, layer: LAYER })

  const peer = await client.getInputEntity(ARGS.peer)
  const sent = await client.sendMessage(peer, { message: 'hello from ' + ARGS.name })
  say({ step: 'sent', id: sent.id, text: sent.message, chat: num(sent.chatId), outgoing: sent.out })

  const got = await nextIncoming(30000)
  say({ step: 'received', text: got.message, sender: num(got.senderId), chat: num(got.chatId) })

  const history = (await client.getMessages(peer, { limit: 10 })).map((m) => m.message)
  const dialogs = (await client.getDialogs({ limit: 10 })).map((d) => [
    num(d.id),
    d.message ? d.message.id : null,
  ])
  say({ step: 'listed', history, dialogs })

  const photo = await client.sendFile(peer, { file: ARGS.photo, caption: 'photo from ' + ARGS.name })
  const own = await client.downloadMedia(photo, {})
  say({
    step: 'photo_sent',
    id: photo.id,
    caption: photo.message,
    media: photo.media ? photo.media.className : null,
    size: photo.photo ? largest(photo.photo) : null,
    sha256: sha256(own),
  })

  const gotPhoto = await nextIncoming(30000)
  const data = await client.downloadMedia(gotPhoto, {})
  say({
    step: 'photo_received',
    caption: gotPhoto.message,
    media: gotPhoto.media ? gotPhoto.media.className : null,
    size: gotPhoto.photo ? largest(gotPhoto.photo) : null,
    sha256: sha256(data),
  })

  // Offline: what the client last knew, then the connection goes.
  const state = await client.invoke(new Api.updates.GetState())
  await client.disconnect()
  say({ step: 'offline', pts: state.pts })
  await nextLine()
  await client.connect()
  let { pts, date, qts } = state
  const texts = []
  let calls = 0
  for (;;) {
    const diff = await client.invoke(new Api.updates.GetDifference({ pts, date, qts }))
    calls += 1
    if (diff instanceof Api.updates.DifferenceEmpty) break
    if (diff instanceof Api.updates.DifferenceTooLong) {
      throw new Error('updates.differenceTooLong from pts ' + pts + ' to ' + diff.pts)
    }
    for (const m of diff.newMessages) if (!m.out) texts.push(m.message)
    const next = diff instanceof Api.updates.DifferenceSlice ? diff.intermediateState : diff.state
    ;({ pts, date, qts } = next)
    if (diff instanceof Api.updates.Difference) break
  }
  say({ step: 'caught_up', texts, from_pts: state.pts, pts, calls })
  await client.destroy()
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
    rl.once('line', (line) => {
      rl.close()
      resolve(line)
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
