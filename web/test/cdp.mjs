// web/test/cdp.mjs — a small Chrome DevTools Protocol client over Node's built-in WebSocket (Node 20:
// --experimental-websocket; Node 22 has it by default), so the browser test needs no npm package.
//
//   const browser = await Browser.launch({ profile, width, height });
//   const page = await browser.newPage();              // a tab; its console lines are collected
//   await page.goto(url); await page.waitForConsole(/re/, ms); await page.screenshot(file);
//   await browser.close();
import { spawn } from 'node:child_process';
import { writeFileSync, mkdirSync, rmSync } from 'node:fs';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

class Connection {
  constructor(ws) {
    this.ws = ws;
    this.nextId = 1;
    this.pending = new Map();
    this.listeners = [];
    ws.addEventListener('message', (event) => {
      const msg = JSON.parse(event.data);
      if (msg.id && this.pending.has(msg.id)) {
        const { resolve, reject, method } = this.pending.get(msg.id);
        this.pending.delete(msg.id);
        if (msg.error) reject(new Error(`${method}: ${msg.error.message}`));
        else resolve(msg.result);
      } else if (msg.method) {
        for (const l of this.listeners) l(msg);
      }
    });
  }
  static open(url) {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url);
      ws.addEventListener('open', () => resolve(new Connection(ws)));
      ws.addEventListener('error', () => reject(new Error(`cannot connect to ${url}`)));
    });
  }
  send(method, params = {}, sessionId) {
    const id = this.nextId++;
    const msg = { id, method, params };
    if (sessionId) msg.sessionId = sessionId;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, method });
      this.ws.send(JSON.stringify(msg));
    });
  }
  on(fn) { this.listeners.push(fn); }
  close() { this.ws.close(); }
}

export class Page {
  constructor(conn, sessionId) {
    this.conn = conn;
    this.sessionId = sessionId;
    this.console = [];   // { type, text, time }
    this.errors = [];    // uncaught exceptions and console errors, as text
    this.waiters = [];
    conn.on((msg) => {
      if (msg.sessionId !== sessionId) return;
      if (msg.method === 'Runtime.consoleAPICalled') {
        const text = msg.params.args.map((a) => (a.value !== undefined ? String(a.value) : a.description || '')).join(' ');
        this.push(msg.params.type, text);
        if (msg.params.type === 'error' || msg.params.type === 'assert') this.errors.push(text);
      } else if (msg.method === 'Runtime.exceptionThrown') {
        const d = msg.params.exceptionDetails;
        const text = (d.exception && d.exception.description) || d.text;
        this.push('exception', text);
        this.errors.push(text);
      } else if (msg.method === 'Log.entryAdded' && msg.params.entry.level === 'error') {
        const text = `${msg.params.entry.source}: ${msg.params.entry.text} ${msg.params.entry.url || ''}`.trim();
        this.push('log-error', text);
        this.errors.push(text);
      }
    });
  }
  push(type, text) {
    const entry = { type, text, time: Date.now() };
    this.console.push(entry);
    if (process.env.TTTLAB_WEB_TEST_VERBOSE === '1') console.log(`  [page ${type}] ${text}`);
    for (const w of this.waiters) w(entry);
  }
  send(method, params) { return this.conn.send(method, params, this.sessionId); }
  async goto(url) {
    this.console.length = 0;
    await this.send('Page.navigate', { url });
  }
  // Resolves with the first console line (from now on, or already seen since goto) matching re.
  waitForConsole(re, timeoutMs) {
    const seen = this.console.find((e) => re.test(e.text));
    if (seen) return Promise.resolve(seen.text);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`no console line matching ${re} within ${timeoutMs / 1000} s`));
      }, timeoutMs);
      const waiter = (entry) => {
        if (!re.test(entry.text)) return;
        clearTimeout(timer);
        this.waiters = this.waiters.filter((w) => w !== waiter);
        resolve(entry.text);
      };
      this.waiters.push(waiter);
    });
  }
  async evaluate(expression) {
    const r = await this.send('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true });
    if (r.exceptionDetails) throw new Error(`evaluate ${expression}: ${r.exceptionDetails.text}`);
    return r.result.value;
  }
  async screenshot(file) {
    const r = await this.send('Page.captureScreenshot', { format: 'png' });
    writeFileSync(file, Buffer.from(r.data, 'base64'));
  }
  async click(x, y) {
    for (const type of ['mouseMoved', 'mousePressed', 'mouseReleased'])
      await this.send('Input.dispatchMouseEvent', { type, x, y, button: 'left', clickCount: 1 });
  }
  // One mouse event: mouseMoved, mousePressed or mouseReleased (left button), at page pixels x, y;
  // modifiers: the keys held (2: Ctrl), as the event reports them.
  async mouse(type, x, y, modifiers = 0) {
    await this.send('Input.dispatchMouseEvent', { type, x, y, modifiers, button: type === 'mouseMoved' ? 'none' : 'left', clickCount: 1 });
  }
  // A turn of the mouse wheel over x, y: deltaY > 0 scrolls down, in pixels, as a browser reports it.
  async wheel(x, y, deltaY) {
    await this.send('Input.dispatchMouseEvent', { type: 'mouseWheel', x, y, deltaX: 0, deltaY });
  }
  // Text typed key by key: each character a keydown (with its keypress) and a keyup, as from a keyboard.
  async typeKeys(text) {
    for (const ch of text) {
      await this.send('Input.dispatchKeyEvent', { type: 'keyDown', key: ch, text: ch, unmodifiedText: ch });
      await this.send('Input.dispatchKeyEvent', { type: 'keyUp', key: ch });
    }
  }
  async key(key, code, keyCode, modifiers = 0) {
    await this.keyDown(key, code, keyCode, modifiers);
    await this.keyUp(key, code, keyCode, modifiers);
  }
  // A key pressed (keyDown) and, later, let go (keyUp): e.g. Ctrl held through a click,
  // keyDown('Control', 'ControlLeft', 17, 2). keyCode is what the page's keydown event reports.
  async keyDown(key, code, keyCode, modifiers = 0) {
    await this.send('Input.dispatchKeyEvent', { type: 'rawKeyDown', key, code, windowsVirtualKeyCode: keyCode, modifiers });
  }
  async keyUp(key, code, keyCode, modifiers = 0) {
    await this.send('Input.dispatchKeyEvent', { type: 'keyUp', key, code, windowsVirtualKeyCode: keyCode, modifiers });
  }
  async type(text) {
    for (const ch of text) await this.send('Input.insertText', { text: ch });
  }
}

export class Browser {
  static async launch({ profile, width = 1280, height = 800, chromium = 'chromium' }) {
    rmSync(profile, { recursive: true, force: true });
    mkdirSync(profile, { recursive: true });
    // SwiftShader: WebGL2 in software, as on a machine without a GPU (CI).
    const args = ['--headless=new', '--no-sandbox', '--use-angle=swiftshader', '--enable-unsafe-swiftshader',
      '--no-first-run', '--no-default-browser-check', '--disable-extensions', '--mute-audio',
      '--remote-debugging-address=127.0.0.1', '--remote-debugging-port=0', `--user-data-dir=${profile}`,
      `--window-size=${width},${height}`, 'about:blank'];
    const proc = spawn(chromium, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    const wsUrl = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`chromium did not start within 30 s:\n${stderr}`)), 30000);
      proc.stderr.on('data', (d) => {
        stderr += d;
        const m = stderr.match(/DevTools listening on (ws:\/\/\S+)/);
        if (m) { clearTimeout(timer); resolve(m[1]); }
      });
      proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`chromium exited (${code}):\n${stderr}`)); });
    });
    const conn = await Connection.open(wsUrl);
    return new Browser(proc, conn, width, height);
  }
  constructor(proc, conn, width, height) {
    this.proc = proc;
    this.conn = conn;
    this.width = width;
    this.height = height;
  }
  async newPage() {
    const { targetId } = await this.conn.send('Target.createTarget', { url: 'about:blank' });
    const { sessionId } = await this.conn.send('Target.attachToTarget', { targetId, flatten: true });
    const page = new Page(this.conn, sessionId);
    await page.send('Runtime.enable');
    await page.send('Log.enable');
    await page.send('Page.enable');
    await page.send('Emulation.setDeviceMetricsOverride', { width: this.width, height: this.height, deviceScaleFactor: 1, mobile: false });
    return page;
  }
  // Downloads are saved into `dir` (an absolute path) without asking, under the names the page gives
  // them; this.downloads lists each as it begins and ends: { name, state ('inProgress', 'completed' or
  // 'canceled'), bytes }, in the order they began.
  async allowDownloads(dir) {
    if (!this.downloads) {
      this.downloads = [];
      this.conn.on((msg) => {
        if (msg.sessionId) return;  // the browser's own events carry no page's session
        if (msg.method === 'Browser.downloadWillBegin') {
          this.downloads.push({ guid: msg.params.guid, name: msg.params.suggestedFilename, state: 'inProgress', bytes: 0 });
        } else if (msg.method === 'Browser.downloadProgress') {
          const d = this.downloads.find((x) => x.guid === msg.params.guid);
          if (d) { d.state = msg.params.state; d.bytes = msg.params.receivedBytes; }
        }
      });
    }
    mkdirSync(dir, { recursive: true });
    await this.conn.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: dir, eventsEnabled: true });
  }
  async close() {
    try { await this.conn.send('Browser.close'); } catch { /* already gone */ }
    this.conn.close();
    await Promise.race([new Promise((r) => this.proc.on('exit', r)), sleep(5000)]);
    if (this.proc.exitCode === null) this.proc.kill('SIGKILL');
  }
}

export { sleep };
