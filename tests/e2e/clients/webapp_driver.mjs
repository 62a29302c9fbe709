// Drive Telegram Web K (the official web app, run by its Vite dev server) in headless
// Chromium as a person would, on commands from the test; run with node (ES module).
//
// argv[2]: JSON {modules, chromium, app, shots}: `modules` is the node_modules directory
// holding playwright-core (.ci/client-browser installs it), `chromium` the browser to
// launch (Debian's, so playwright downloads none), `app` the page to open (the dev
// server's URL with ?noSharedWorker=1, so that the app's MTProto worker is a plain worker
// whose console playwright sees) and `shots` the directory for screenshots and the
// console log (console.log there: the page's and its workers' lines).
//
// Commands are JSON lines on stdin, {"do": name, ...}; each is answered by one JSON line
// on stdout, {"step": name, ...} or {"step": name, "error": "..."}; every step ends with a
// screenshot `NN-<name>.png` (named in the answer as `shot`). The rpc calls the app made
// (from its worker's log lines) come with the `methods` command.
import fs from 'node:fs'
import path from 'node:path'
import readline from 'node:readline'
import { pathToFileURL } from 'node:url'

const ARGS = JSON.parse(process.argv[2])
const { chromium } = (await import(pathToFileURL(path.join(ARGS.modules, 'playwright-core/index.js')).href)).default

const consoleLog = fs.createWriteStream(path.join(ARGS.shots, 'console.log'))
// method -> {calls, results, errors: {message: count}}
const methods = new Map()
let shotNumber = 0

function method(name) {
  if (!methods.has(name)) methods.set(name, { calls: 0, results: 0, errors: {} })
  return methods.get(name)
}

// The app's network log lines (its worker's, mirrored to the page): "[wrapApiCall] call
// NAME {...}", "[processMessage] rpc result {...} {... humanReadable: NAME}" and
// "[processMessage] rpc error {... error_message: MSG} {... humanReadable: NAME}".
function account(text) {
  let m = text.match(/\[wrapApiCall\] call ([\w.]+)/)
  if (m) {
    method(m[1]).calls++
    return
  }
  if (!text.includes('[processMessage] rpc ')) return
  m = text.match(/humanReadable: ([\w.]+)/)
  if (!m) return
  if (text.includes('[processMessage] rpc error')) {
    const err = (text.match(/error_message: ([^,}\s]+)/) || [])[1] || '?'
    const errors = method(m[1]).errors
    errors[err] = (errors[err] || 0) + 1
  } else if (text.includes('[processMessage] rpc result')) {
    method(m[1]).results++
  }
}

// Wait until the message menu has closed (its fading copy takes clicks meant for what
// is under it).
async function closedMenu(timeout) {
  await page.locator('#bubble-contextmenu').locator('visible=true').waitFor({ state: 'hidden', timeout }).catch(() => {})
  await page.waitForTimeout(300)
}

async function snap(name) {
  const file = `${String(++shotNumber).padStart(2, '0')}-${name}.png`
  await page.screenshot({ path: path.join(ARGS.shots, file) }).catch(() => {})
  return file
}

function say(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n')
}

function watch(page) {
  // The page mirrors its workers' lines, so only the page's console is counted; the
  // workers' own lines are logged as well, marked.
  page.on('console', (msg) => {
    const text = msg.text()
    consoleLog.write(`[page ${msg.type()}] ${text}\n`)
    account(text)
  })
  page.on('pageerror', (err) => consoleLog.write(`[page error] ${err.stack || err}\n`))
  page.on('worker', (worker) => {
    worker.on('console', (msg) => consoleLog.write(`[worker ${msg.type()}] ${msg.text()}\n`))
  })
}

const browser = await chromium.launch({
  executablePath: ARGS.chromium,
  headless: true,
  args: ['--no-sandbox', '--disable-dev-shm-usage'],
})
let context = null
let page = null

async function newContext() {
  if (context) await context.close()
  context = await browser.newContext({ viewport: { width: 1280, height: 800 }, acceptDownloads: true })
  page = await context.newPage()
  watch(page)
}

const visible = (selector) => page.locator(selector).locator('visible=true')
// The open chat: the app keeps other chats' views beside it, off screen, each with its
// own input (typing into one of those scrolls the page sideways and sends nothing).
const CHAT = '.chats-container > .chat.active'

async function bubbles() {
  return page.evaluate((chat) =>
    Array.from(document.querySelectorAll(`${chat} .bubbles .bubble[data-mid]`)).map((b) => ({
      mid: Number(b.dataset.mid),
      text: (b.querySelector('.message') || b).innerText.split('\n')[0],
      out: b.classList.contains('is-out'),
    })),
    CHAT,
  )
}

// Wait for a message with `text` in the open chat. Now and then (2 runs in 12 here,
// after scrolling through a long history) the app files a message it sent without
// drawing it in the open chat, though the chat list shows it: like a person, reload the
// page then and open the chat again. Each time it happens is logged (reloads.log).
async function waitBubble(text, timeout = 60000) {
  const deadline = Date.now() + timeout
  const shown = (ms) =>
    page.waitForFunction(
      (t) => Array.from(document.querySelectorAll('.bubbles .bubble[data-mid] .message')).some((m) => m.innerText.includes(t)),
      text,
      { timeout: Math.max(1000, ms) },
    )
  try {
    await shown(Math.min(15000, deadline - Date.now()))
    return
  } catch (err) {
    if (Date.now() >= deadline) throw err
  }
  const title = await page.locator('.chatlist-chat.active .peer-title').first().innerText({ timeout: 5000 })
  fs.appendFileSync(path.join(ARGS.shots, 'reloads.log'), `${new Date().toISOString()} ${text} (chat ${title})\n`)
  await snap('not-drawn')
  await page.reload({ timeout })
  const chat = page.locator('.chatlist-chat', { hasText: title }).first()
  await chat.waitFor({ timeout: deadline - Date.now() })
  await chat.click()
  await shown(deadline - Date.now())
}

async function type(text) {
  const input = visible(`${CHAT} .chat-input .input-message-input[contenteditable="true"]`).first()
  await input.click()
  await page.keyboard.type(text, { delay: 10 })
}

// A loaded avatar picture (an <img> with pixels, not the blurred preview shown
// meanwhile) in the chat list's chat named `title`, or else shown inside `within`: its
// size and the average colour of its middle, read back through a canvas.
function loadedAvatar(where, timeout) {
  return page.waitForFunction(
    ({ title, within }) => {
      const roots = title
        ? Array.from(document.querySelectorAll('.chatlist-chat')).filter((c) => {
            const name = c.querySelector('.peer-title')
            return name && name.innerText.trim() === title
          })
        : Array.from(document.querySelectorAll(within))
      for (const root of roots) {
        const img = Array.from(root.querySelectorAll('.avatar img.avatar-photo:not(.avatar-photo-thumbnail)')).find(
          (i) => i.complete && i.naturalWidth > 0 && i.getClientRects().length > 0,
        )
        if (!img) continue
        const w = img.naturalWidth
        const h = img.naturalHeight
        const canvas = document.createElement('canvas')
        canvas.width = w
        canvas.height = h
        const ctx = canvas.getContext('2d')
        ctx.drawImage(img, 0, 0)
        const data = ctx.getImageData(Math.floor(w / 4), Math.floor(h / 4), Math.ceil(w / 2), Math.ceil(h / 2)).data
        const sum = [0, 0, 0]
        for (let p = 0; p < data.length; p += 4) for (let k = 0; k < 3; k++) sum[k] += data[p + k]
        const n = data.length / 4
        return { w, h, src: img.src.split(':')[0], colour: sum.map((s) => Math.round(s / n)) }
      }
      return null
    },
    where,
    { timeout },
  ).then((h) => h.jsonValue())
}

const STEPS = {
  // The app's first screen: the QR login page with its code drawn.
  async open({ timeout }) {
    await newContext()
    await page.goto(ARGS.app, { timeout })
    await visible('canvas.qr-canvas').first().waitFor({ timeout })
    return { title: await visible('h4').first().innerText() }
  },

  // Whatever page the app shows next, the chat list once it is there.
  async chatList({ timeout }) {
    await visible('.chatlist-container, #chatlist-container').first().waitFor({ timeout })
    await page.waitForTimeout(1000)
    return { chats: await page.locator('.chatlist-chat').count() }
  },

  // A clean browser (no session), then phone and code; a new number gets the sign-up page.
  async signUp({ phone, code, first, last, timeout }) {
    await newContext()
    await page.goto(ARGS.app, { timeout })
    await visible('canvas.qr-canvas').first().waitFor({ timeout })
    await page.getByText('Log in by phone number').click()
    await visible('.input-field-input[inputmode="decimal"]').first().click()
    await page.keyboard.type(phone, { delay: 20 })
    await page.getByRole('button', { name: 'Next' }).click()
    await visible('input[type="tel"]').first().click()
    await page.keyboard.type(code, { delay: 20 })
    await page.getByRole('button', { name: 'Start Messaging' }).waitFor({ timeout })
    const names = visible('.input-field-input[contenteditable]')
    await names.nth(0).click()
    await page.keyboard.type(first, { delay: 10 })
    await names.nth(1).click()
    await page.keyboard.type(last, { delay: 10 })
    await page.getByRole('button', { name: 'Start Messaging' }).click()
    return STEPS.chatList({ timeout })
  },

  // The chat named `title` in the chat list, once its preview shows `last`; open it.
  async openChat({ title, last, timeout }) {
    const chat = page.locator('.chatlist-chat', { hasText: title }).filter({ hasText: last }).first()
    await chat.waitFor({ timeout })
    const preview = await chat.innerText()
    await chat.click()
    await visible('.bubbles .bubble[data-mid]').first().waitFor({ timeout })
    await page.waitForTimeout(1000)
    return { preview, bubbles: await bubbles() }
  },

  // Scroll up until `first` shows, then down through the whole chat to its end: every
  // bubble seen on the way (by message id), and the bubbles on screen in their order.
  async scrollHistory({ first, timeout }) {
    const deadline = Date.now() + timeout
    const seen = new Map()
    const look = async () => {
      for (const b of await bubbles()) seen.set(b.mid, b.text)
    }
    const scroll = (how) =>
      page.evaluate((how) => {
        const s = document.querySelector('.bubbles .scrollable-y')
        if (!s) return true
        if (how === 'top') s.scrollTop = 0
        else s.scrollTop += s.clientHeight / 2
        return s.scrollTop + s.clientHeight >= s.scrollHeight - 2
      }, how)
    for (;;) {
      await look()
      if ([...seen.values()].some((t) => t.includes(first))) break
      if (Date.now() > deadline) throw new Error(`scrolled up for ${timeout} ms and no ${first}`)
      await scroll('top')
      await page.waitForTimeout(700)
    }
    await page.waitForTimeout(1000)
    await look()
    const top = await bubbles()
    while (!(await scroll('down')) && Date.now() < deadline) {
      await page.waitForTimeout(150)
      await look()
    }
    await page.waitForTimeout(500)
    await look()
    const byId = [...seen.entries()].sort((a, b) => a[0] - b[0])
    return { inDom: top.map((b) => b.text), byId: byId.map((e) => e[1]), ids: byId.map((e) => e[0]) }
  },

  async sendText({ text, timeout }) {
    await type(text)
    await page.keyboard.press('Enter')
    await waitBubble(text, timeout)
    return { bubbles: (await bubbles()).slice(-3) }
  },

  // Send what the input holds (typed by typeDraft).
  async send({ text, timeout }) {
    await page.keyboard.press('Enter')
    await waitBubble(text, timeout)
    return { bubbles: (await bubbles()).slice(-3) }
  },

  // Once `last` shows, the open chat's bubbles whose text starts with `prefix`, in the
  // order they stand on screen.
  async texts({ prefix, last, timeout }) {
    await waitBubble(last, timeout)
    await page.waitForTimeout(1000) // anything that would still move in has done so
    return { texts: (await bubbles()).map((b) => b.text).filter((t) => t.startsWith(prefix)) }
  },

  async waitText({ text, timeout }) {
    await waitBubble(text, timeout)
    return { bubbles: (await bubbles()).slice(-3) }
  },

  // The chat's header shows the peer typing.
  async seeTyping({ timeout }) {
    const status = visible('.chat-info .info, .chat-info .peer-typing-container').first()
    await page.waitForFunction(
      () => Array.from(document.querySelectorAll('.chat-info')).some((e) => /typing/i.test(e.innerText)),
      null,
      { timeout },
    )
    return { status: await status.innerText().catch(() => '') }
  },

  // Type without sending (the app sends its typing action at once).
  async typeDraft({ text }) {
    await type(text)
    return {}
  },

  async clearDraft() {
    const input = visible(`${CHAT} .chat-input .input-message-input[contenteditable="true"]`).first()
    await input.click()
    await page.keyboard.press('Control+A')
    await page.keyboard.press('Backspace')
    return {}
  },

  // A message's context menu (right click on its bubble), then the item named `item`.
  async menu({ text, item, timeout }) {
    const bubble = page.locator('.bubbles .bubble[data-mid]', { hasText: text }).last()
    await bubble.scrollIntoViewIfNeeded({ timeout })
    const box = await bubble.locator('.message').first().boundingBox()
    await page.mouse.move(box.x + box.width / 3, box.y + box.height / 2)
    await page.mouse.click(box.x + box.width / 3, box.y + box.height / 2, { button: 'right' })
    const entry = visible('#bubble-contextmenu .btn-menu-item, .btn-menu.active .btn-menu-item').filter({ hasText: item }).first()
    await entry.waitFor({ timeout: 10000 })
    await page.waitForTimeout(400) // the menu's opening animation
    await page.screenshot({ path: path.join(ARGS.shots, `${String(++shotNumber).padStart(2, '0')}-menu-${item}.png`) })
    await entry.click({ timeout })
    return {}
  },

  async edit({ text, newText, timeout }) {
    await STEPS.menu({ text, item: 'Edit', timeout })
    const input = visible(`${CHAT} .chat-input .input-message-input[contenteditable="true"]`).first()
    await input.click()
    await page.keyboard.press('Control+A')
    await page.keyboard.type(newText, { delay: 10 })
    await page.keyboard.press('Enter')
    await waitBubble(newText, timeout)
    return { bubbles: (await bubbles()).slice(-3) }
  },

  // Delete, ticking "Also delete for <peer>" in the popup.
  async deleteForBoth({ text, timeout }) {
    await STEPS.menu({ text, item: 'Delete', timeout })
    const popup = visible('.popup').last()
    await popup.waitFor({ timeout })
    const also = popup.locator('.checkbox-field').first()
    const boxes = await popup.locator('.checkbox-field').count()
    if (boxes) {
      const input = also.locator('input[type="checkbox"]')
      if (!(await input.isChecked())) await also.click()
    }
    const checked = boxes ? await also.locator('input[type="checkbox"]').isChecked() : false
    const label = boxes ? await also.innerText() : ''
    await popup.locator('button', { hasText: /delete/i }).last().click({ timeout })
    await page.waitForFunction(
      (t) => !Array.from(document.querySelectorAll('.bubbles .bubble[data-mid] .message')).some((m) => m.innerText.includes(t)),
      text,
      { timeout },
    )
    return { checked, label }
  },

  async reply({ text, replyText, timeout }) {
    await STEPS.menu({ text, item: 'Reply', timeout })
    await visible(`${CHAT} .chat-input .reply-wrapper`).first().waitFor({ timeout })
    await closedMenu(timeout)
    await type(replyText)
    await snap('reply-typed')
    await page.keyboard.press('Enter')
    await waitBubble(replyText, timeout)
    const quoted = await page
      .locator('.bubbles .bubble[data-mid]', { hasText: replyText })
      .last()
      .locator('.reply')
      .first()
      .innerText()
      .catch(() => '')
    return { quoted }
  },

  // A file from the disk through the attach menu's entry `item` ("Photo or Video", or
  // "Document"), with `caption`, sent from the app's preview popup; done when the bubble
  // with the caption is sent (no longer pending).
  async attach({ file, item, caption, timeout }) {
    await visible('.attach-file').first().click()
    const chooser = page.waitForEvent('filechooser', { timeout })
    const entry = visible('.btn-menu-item').filter({ hasText: item }).first()
    await entry.waitFor({ timeout: 10000 })
    await page.waitForTimeout(300) // the menu's opening animation
    await entry.click({ timeout })
    await (await chooser).setFiles(file)
    const popup = visible('.popup-new-media').first()
    await popup.waitFor({ timeout })
    await popup.locator('.input-message-input[contenteditable="true"]').first().click()
    await page.keyboard.type(caption, { delay: 10 })
    await popup.locator('button.btn-primary').first().click({ timeout })
    await page.waitForFunction(
      (t) => {
        const found = Array.from(document.querySelectorAll('.bubbles .bubble[data-mid]')).filter((b) => b.innerText.includes(t))
        const b = found[found.length - 1]
        return b && !b.classList.contains('is-sending') && !b.querySelector('.preloader-container, .icon-clock, .tgico-sending')
      },
      caption,
      { timeout },
    )
    return { bubbles: (await bubbles()).slice(-2) }
  },

  // A photo bubble with `caption`: its picture shows in the chat (an image with
  // pixels), then its full size in the media viewer (closed again with Escape).
  async seePhoto({ caption, timeout }) {
    const bubble = page.locator('.bubbles .bubble[data-mid]', { hasText: caption }).last()
    await bubble.waitFor({ timeout })
    await bubble.scrollIntoViewIfNeeded({ timeout })
    const shown = (selector) =>
      page.waitForFunction(
        ([t, sel]) => {
          const root = t ? Array.from(document.querySelectorAll('.bubbles .bubble[data-mid]')).filter((b) => b.innerText.includes(t)).pop() : document
          const imgs = root ? Array.from(root.querySelectorAll(sel)) : []
          const img = imgs.filter((i) => i.complete && i.naturalWidth > 0).pop()
          return img ? { w: img.naturalWidth, h: img.naturalHeight, src: img.src.slice(0, 5) } : null
        },
        [caption, selector],
        { timeout },
      ).then((h) => h.jsonValue())
    const thumb = await shown('img.media-photo')
    // A click while the photo still loads goes to its progress circle (and stops the
    // load): like a person, wait for the picture and click again when nothing opened.
    for (let attempt = 1; ; attempt++) {
      await bubble.locator('.preloader-container').first().waitFor({ state: 'detached', timeout }).catch(() => {})
      await bubble.locator('img.media-photo').last().click({ timeout })
      try {
        await visible('.media-viewer-whole').first().waitFor({ timeout: 5000 })
        break
      } catch (err) {
        if (attempt >= 5) throw err
      }
    }
    const full = await page.waitForFunction(
      (minWidth) => {
        const imgs = Array.from(document.querySelectorAll('.media-viewer-whole .media-viewer-aspecter img'))
        const img = imgs.filter((i) => i.complete && i.naturalWidth >= minWidth).pop()
        return img ? { w: img.naturalWidth, h: img.naturalHeight } : null
      },
      thumb.w,
      { timeout },
    ).then((h) => h.jsonValue())
    await page.waitForTimeout(500)
    await page.screenshot({ path: path.join(ARGS.shots, `${String(++shotNumber).padStart(2, '0')}-photo-viewer.png`) })
    await page.keyboard.press('Escape')
    await visible('.media-viewer-whole').first().waitFor({ state: 'detached', timeout }).catch(() => {})
    return { thumb, full }
  },

  // A document bubble named `doc`: a click downloads it; the file the browser saves.
  async download({ doc, timeout }) {
    const bubble = page.locator('.bubbles .bubble[data-mid]', { hasText: doc }).last()
    await bubble.waitFor({ timeout })
    await bubble.scrollIntoViewIfNeeded({ timeout })
    const saved = page.waitForEvent('download', { timeout })
    await bubble.locator('.document-ico, .document').first().click({ timeout })
    const file = await saved
    const to = path.join(ARGS.shots, `downloaded-${doc}`)
    await file.saveAs(to)
    return { path: to, suggested: file.suggestedFilename() }
  },

  // Search in the open chat (the search button in its header) for `query`; the results
  // the app lists.
  async searchChat({ query, timeout }) {
    const buttons = visible('.topbar .chat-utils > .btn-icon')
    const count = await buttons.count()
    await buttons.nth(count - 2).click({ timeout }) // the last is the chat's menu
    const input = visible('.topbar-search-input').first()
    await input.waitFor({ timeout })
    await input.click()
    await page.keyboard.type(query, { delay: 20 })
    await page.keyboard.press('Enter')
    const rows = visible('.topbar-search-left-chatlist .chatlist-chat, .chat-search-results .chatlist-chat')
    await rows.filter({ hasText: query }).first().waitFor({ timeout })
    await page.waitForTimeout(500)
    const found = await rows.allInnerTexts()
    const counter = await visible('.chat-search-footer-count').first().innerText().catch(() => '')
    return { found, counter }
  },

  async closeSearch() {
    await page.keyboard.press('Escape')
    await page.waitForTimeout(300)
    await page.keyboard.press('Escape')
    return {}
  },

  // A chat's context menu in the chat list (right click), then the item named `item`,
  // and then `then` (a submenu's or popup's entry) when given.
  async chatMenu({ title, item, then, confirm, timeout }) {
    const chat = page.locator('.chatlist-chat', { hasText: title }).first()
    const box = await chat.boundingBox()
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2)
    await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2, { button: 'right' })
    const entry = visible('.btn-menu-item').filter({ hasText: item }).first()
    await entry.waitFor({ timeout: 10000 })
    await page.waitForTimeout(400)
    await entry.click({ timeout })
    if (then) {
      const next = visible('.btn-menu-item, .popup button, .popup .row, .popup label').filter({ hasText: then }).first()
      await next.waitFor({ timeout: 10000 })
      await page.waitForTimeout(400)
      await next.click({ timeout })
    }
    if (confirm) {
      await page.waitForTimeout(400)
      await visible('button').filter({ hasText: new RegExp(`^\\s*${confirm}\\s*$`, 'i') }).last().click({ timeout })
    }
    await page.waitForTimeout(1500)
    return { chats: await page.locator('.chatlist-chat .peer-title').allInnerTexts() }
  },

  // Close the app (the tab goes to a blank page; the session stays in the browser).
  async leave() {
    await page.goto('about:blank')
    return {}
  },

  // Open the app again; the chat named `title` shows in the chat list with `last`.
  // Now and then the app comes up blank, its storage not open yet ("STORAGE_OFFLINE"
  // in its console): like a person, reload then.
  async reopen({ title, last, timeout }) {
    const chat = page.locator('.chatlist-chat', { hasText: title }).filter({ hasText: last }).first()
    await page.goto(ARGS.app, { timeout })
    for (let attempt = 1; ; attempt++) {
      try {
        await chat.waitFor({ timeout: timeout / 3 })
        return { attempts: attempt }
      } catch (err) {
        if (attempt >= 3) throw err
      }
      await snap(`reopen-blank-${attempt}`)
      await page.reload({ timeout })
    }
  },

  // Reload the page; the chat named `title` shows again in the chat list (the page
  // with the list, not a login page).
  async reload({ title, timeout }) {
    await page.reload({ timeout })
    await page.locator('.chatlist-chat', { hasText: title }).first().waitFor({ timeout })
    await page.waitForTimeout(1000)
    const login = await page.locator('canvas.qr-canvas, input[type="tel"]').locator('visible=true').count()
    return { login }
  },

  // The avatar of the chat named `title` in the chat list, once its picture has loaded
  // (see loadedAvatar). The avatar alone is kept as a screenshot too
  // (`NN-avatar-<title>.png`).
  async chatAvatar({ title, timeout }) {
    const chat = page.locator('.chatlist-chat').filter({ has: page.locator('.peer-title', { hasText: title }) }).first()
    await chat.waitFor({ timeout })
    const picture = await loadedAvatar({ title }, timeout)
    await page.waitForTimeout(300) // the picture's fade-in
    const file = `${String(++shotNumber).padStart(2, '0')}-avatar-${title}.png`
    await chat.locator('.avatar').first().screenshot({ path: path.join(ARGS.shots, file) })
    return { ...picture, avatarShot: file }
  },

  // Set the account's profile photo from the disk as a person does: the menu's Settings,
  // the pencil (edit profile), a click on the avatar, the file chosen, the crop popup's
  // check button, then the tab's save button. Done when the app has its answer to
  // photos.uploadProfilePhoto (an error fails the step) and the settings tab shows the
  // new picture (as loadedAvatar has it); the settings tab is closed again.
  async setProfilePhoto({ file, timeout }) {
    const uploads = () => ({ ...method('photos.uploadProfilePhoto'), errors: { ...method('photos.uploadProfilePhoto').errors } })
    const before = uploads()
    await visible('.sidebar-tools-button').first().click({ timeout })
    const item = visible('.btn-menu-item').filter({ hasText: 'Settings' }).first()
    await item.waitFor({ timeout: 10000 })
    await page.waitForTimeout(400) // the menu's opening animation
    await item.click({ timeout })
    const settings = visible('.settings-container').first()
    await settings.waitFor({ timeout })
    // The header holds the back button, the pencil and the tab's menu.
    await settings.locator('.sidebar-header button.btn-icon:not(.sidebar-close-button):not(.btn-menu-toggle)').first().click({ timeout })
    const edit = visible('.edit-profile-container').first()
    await edit.waitFor({ timeout })
    await page.waitForTimeout(400) // the tab's sliding in
    const chooser = page.waitForEvent('filechooser', { timeout })
    await edit.locator('.avatar-edit').first().click({ timeout })
    await (await chooser).setFiles(file)
    const popup = visible('.popup-avatar').first()
    await popup.waitFor({ timeout })
    await page.waitForTimeout(400) // the popup's opening animation
    await snap('avatar-crop')
    await popup.locator('.btn-crop').click({ timeout })
    await popup.waitFor({ state: 'hidden', timeout })
    const save = edit.locator('.btn-corner.is-visible').first()
    await save.waitFor({ timeout })
    await snap('avatar-cropped')
    await save.click({ timeout })
    const deadline = Date.now() + timeout
    for (;;) {
      const now = uploads()
      const failed = Object.entries(now.errors).filter(([e, n]) => n > (before.errors[e] || 0))
      if (failed.length) throw new Error(`photos.uploadProfilePhoto failed: ${JSON.stringify(failed)}`)
      if (now.results > before.results) break
      if (Date.now() > deadline) throw new Error(`no answer to photos.uploadProfilePhoto in ${timeout} ms`)
      await page.waitForTimeout(200)
    }
    // The edit tab closes itself once the profile is saved.
    await edit.waitFor({ state: 'hidden', timeout })
    const shown = await loadedAvatar({ within: '.settings-container' }, timeout)
    await page.waitForTimeout(300) // the picture's fade-in
    await snap('settings-with-photo')
    await settings.locator('.sidebar-header .sidebar-close-button').first().click({ timeout })
    await settings.waitFor({ state: 'hidden', timeout })
    return { uploads: uploads(), shown }
  },

  async chatTitles() {
    return { titles: await page.locator('.chatlist-chat .peer-title').allInnerTexts() }
  },

  // Leave the app alone for `seconds`: the calls it made meanwhile, by method (written
  // to idle.json too).
  async idle({ seconds }) {
    const before = new Map([...methods].map(([k, v]) => [k, { ...v, errors: { ...v.errors } }]))
    await page.waitForTimeout(seconds * 1000)
    const during = {}
    for (const [name, now] of methods) {
      const was = before.get(name) || { calls: 0, results: 0, errors: {} }
      const errors = {}
      for (const [e, n] of Object.entries(now.errors)) if (n - (was.errors[e] || 0)) errors[e] = n - (was.errors[e] || 0)
      const calls = now.calls - was.calls
      if (calls || Object.keys(errors).length) during[name] = { calls, results: now.results - was.results, errors }
    }
    fs.writeFileSync(path.join(ARGS.shots, 'idle.json'), JSON.stringify({ seconds, during }, null, 1))
    return { seconds, during }
  },

  async methods() {
    return { methods: Object.fromEntries(methods) }
  },
}

const lines = readline.createInterface({ input: process.stdin })
for await (const line of lines) {
  if (!line.trim()) continue
  const cmd = JSON.parse(line)
  const name = cmd.do
  if (name === 'close') break
  let answer
  try {
    answer = { step: name, ...(await STEPS[name]({ timeout: 60000, ...cmd })) }
  } catch (err) {
    answer = { step: name, error: String(err && err.stack ? err.stack : err) }
  }
  if (page && name !== 'methods') {
    const shot = `${String(++shotNumber).padStart(2, '0')}-${cmd.shot || name}.png`
    await page.screenshot({ path: path.join(ARGS.shots, shot) }).catch(() => {})
    answer.shot = shot
  }
  say(answer)
}
await browser.close()
consoleLog.end()
say({ step: 'closed' })
process.exit(0)
