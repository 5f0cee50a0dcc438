// web/test/browser_test.mjs — the browser test: the built site (build-web/site/) in headless Chromium.
//
//   node --experimental-websocket web/test/browser_test.mjs --site build-web/site --out DIR \
//        --native NATIVE.json --panels PANELS.txt [--bench --repeats N]
//
// It serves the site with web/serve.py and checks, failing on any console error or uncaught exception:
//   1. the page loads and draws its first frame (the time from navigation is reported);
//   2. the engine check (?check=engine, web/engine_check.hpp) in the tab gives the numbers of the native
//      build (NATIVE.json, from tttlab_web_check on the same files): verify passes every check, the same
//      validation loss to rounding, the same greedy bytes, the same training losses to rounding;
//   3. every panel renders (?panel=ID; the page's title names it), and lessons 1 and 2 open docked
//      (?lesson=01; lesson 2's model arrives after the first frame, and its view waits for it): a
//      screenshot of each in DIR;
//   4. a link carrying a state (#state=…, lab/state/state_link.hpp) opens that state, and a broken one
//      leaves the lab running.
// --bench: only 1 and 2, each timed part of the check run N times (the medians go to results.json).
// Writes DIR/results.json (the browser's timings and the page's download size) and exits non-zero on a
// failure, saying which.
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync, mkdirSync, statSync, readdirSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import path from 'node:path';
import { Browser, sleep } from './cdp.mjs';

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1] && !all[i + 1].startsWith('--') ? all[i + 1] : true]);
  return acc;
}, []));
const site = args.site || 'build-web/site';
const out = args.out || 'build-web/test';
// --panels FILE: `tttlab gui --list-panels` output (id, name, summary in fixed columns).
const panels = args.panels ? readFileSync(args.panels, 'utf8').split('\n').filter((l) => l.trim())
  .map((l) => ({ id: l.slice(0, 15).trim(), name: l.slice(15, 40).trim() })) : [];
mkdirSync(out, { recursive: true });

const failures = [];
const fail = (what) => { failures.push(what); console.log(`FAIL ${what}`); };
const ok = (what) => console.log(`ok   ${what}`);

// The page's download, raw and gzip-compressed: what the first frame waits for, and the models that
// come after it (models.*, web/late_files.js). sw.js is not part of a page load.
const later = (f) => f.startsWith('models.');
const sizes = { raw: 0, gzip: 0, later_raw: 0, later_gzip: 0, files: {} };
for (const f of readdirSync(site)) {
  const p = path.join(site, f);
  if (!statSync(p).isFile() || f === 'sw.js') continue;
  const raw = readFileSync(p);
  const gz = gzipSync(raw, { level: 9 }).length;
  sizes.files[f] = { raw: raw.length, gzip: gz };
  sizes[later(f) ? 'later_raw' : 'raw'] += raw.length;
  sizes[later(f) ? 'later_gzip' : 'gzip'] += gz;
}
const mb = (n) => (n / 1e6).toFixed(2);
console.log(`site: ${mb(sizes.raw)} MB before the first frame, ${mb(sizes.gzip)} MB gzip-compressed; ` +
            `then ${mb(sizes.later_raw)} MB (${mb(sizes.later_gzip)} MB gzip) of models after it`);

const server = spawn('python3', ['web/serve.py', '--dir', site, '--port', '0'], {
  stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, TTTLAB_SERVE_QUIET: '1' } });
const base = await new Promise((resolve, reject) => {
  let text = '';
  server.stdout.on('data', (d) => { text += d; const m = text.match(/at (http:\/\/\S+\/)/); if (m) resolve(m[1]); });
  server.on('exit', (code) => reject(new Error(`web/serve.py exited (${code})`)));
});

const browser = await Browser.launch({ profile: path.join(out, 'profile'), width: 1280, height: 800 });
const results = { sizes };
try {
  const page = await browser.newPage();
  const checkErrors = (where) => {
    for (const e of page.errors.splice(0)) fail(`${where}: the page reported an error: ${e}`);
  };

  // 1 + 2: first frame and the engine check.
  const repeats = Number(args.repeats || 1);
  await page.goto(`${base}index.html?check=engine&repeats=${repeats}`);
  const first = await page.waitForConsole(/^TTTLAB_FIRST_FRAME /, 90000);
  results.first_frame_ms = Number(first.split(' ')[1]);
  ok(`first frame ${results.first_frame_ms.toFixed(0)} ms after navigation`);
  const line = await page.waitForConsole(/^TTTLAB_CHECK(_FAILED)? /, 600000);
  await page.screenshot(path.join(out, 'check.png'));
  checkErrors('engine check page');
  if (line.startsWith('TTTLAB_CHECK_FAILED')) {
    fail(`engine check: ${line}`);
  } else {
    const web = JSON.parse(line.slice('TTTLAB_CHECK '.length));
    results.web_check = web;
    if (web.verify.passed !== web.verify.checks) fail(`verify: ${web.verify.passed}/${web.verify.checks} checks passed in the browser`);
    else ok(`verify: ${web.verify.passed}/${web.verify.checks} checks passed in the browser`);
    if (args.native) {
      const native = JSON.parse(readFileSync(args.native, 'utf8'));
      results.native_check = native;
      const close = (a, b, rel) => Math.abs(a - b) <= rel * Math.max(1, Math.abs(b));
      // Rounding: WebAssembly SIMD has no fused multiply-add and 4-wide vectors where the native build
      // has AVX2's 8-wide FMA, so sums round differently; 1e-5 relative is far below what a bug moves.
      if (close(web.eval.loss, native.eval.loss, 1e-5)) ok(`eval loss ${web.eval.loss.toFixed(6)} (native ${native.eval.loss.toFixed(6)})`);
      else fail(`eval loss ${web.eval.loss} in the browser, ${native.eval.loss} natively`);
      if (web.greedy.bytes_hex === native.greedy.bytes_hex) ok(`greedy bytes identical (${web.greedy.bytes_hex.length / 2} bytes)`);
      else fail(`greedy bytes differ: browser ${web.greedy.bytes_hex}, native ${native.greedy.bytes_hex}`);
      const wl = web.train.losses, nl = native.train.losses;
      if (wl.length === nl.length && wl.every((x, i) => close(x, nl[i], 1e-4)))
        ok(`training: ${wl.length} steps, losses ${wl.map((x) => x.toFixed(4)).join(' ')} (native the same to 1e-4)`);
      else fail(`training losses differ: browser ${wl.join(' ')}, native ${nl.join(' ')}`);
    }
  }

  // 3 + 4: every panel, lesson 1, a view carried in a link, a broken link.
  const state = { format: 'tttlab-state', version: 1, active_panel: 'recall', panels: {} };
  const link = Buffer.from(JSON.stringify(state)).toString('base64url');
  const views = args.bench ? [] : panels.map((p) => ({ name: `panel-${p.id}`, query: `?panel=${p.id}`, title: p.name }))
    .concat([{ name: 'lesson-01', query: '?lesson=01', title: 'lesson: One gradient step per token' },
             // Its model comes after the first frame (models.data): the view waits for it, then fills.
             { name: 'lesson-02', query: '?lesson=02', title: 'lesson: The self-supervised task is learned', late: true },
             { name: 'link-state', query: `#state=${link}`, title: 'Recall lab — link.tttlab' },
             { name: 'link-broken', query: '#state=not$base64', title: 'TTT Lab — ', minBytes: 10000 }]);
  for (const view of views) {
    await page.goto('about:blank');
    await page.goto(`${base}index.html${view.query}`);
    await page.waitForConsole(/^TTTLAB_FIRST_FRAME /, 90000);
    // The engine has filled the panel (the app says so once three frames showed its finished results).
    await page.waitForConsole(/^TTTLAB_SETTLED /, 180000);
    if (view.late) await page.waitForConsole(/^TTTLAB_LATE_FILES /, 1000);
    const file = path.join(out, `${view.name}.png`);
    await page.screenshot(file);
    checkErrors(view.name);
    const title = await page.evaluate('document.title');
    const bytes = statSync(file).size;
    // An empty or black canvas compresses to a few kB; a drawn panel is tens of kB.
    if (bytes < (view.minBytes || 20000)) fail(`${view.name}: the screenshot is ${bytes} bytes: nothing drawn?`);
    else if (!title.includes(view.title)) fail(`${view.name}: the page's title is "${title}", not one with "${view.title}"`);
    else ok(`${view.name}: drawn, titled "${title}" (${file}, ${(bytes / 1024).toFixed(0)} kB)`);
  }
} catch (e) {
  fail(e.message);
} finally {
  await browser.close();
  server.kill();
}
writeFileSync(path.join(out, 'results.json'), JSON.stringify(results, null, 2));
console.log(failures.length ? `browser test: ${failures.length} failure(s)` : 'browser test: every check passed');
process.exit(failures.length ? 1 : 0);
