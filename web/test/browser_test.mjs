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
//      leaves the lab running;
//   5. lesson 1 is taken by real mouse and keyboard events, as a student takes it (takeLesson below):
//      predict, run, reveal, exercises answered and checked; the app's own saved progress must then say
//      so (a screenshot of the lesson afterwards in DIR);
//   6. a tiny model is trained in the Training panel by clicks (trainInTheTab below): a short run set with
//      the sliders, started, trained and checkpointed; its metrics must show the loss falling, and a click
//      on its checkpoint must download config.json and model.safetensors, the page's own bytes, into
//      DIR/downloads (a screenshot afterwards in DIR); after a reload the page must still have it.
// --bench: only 1 and 2, each timed part of the check run N times (the medians go to results.json).
// Writes DIR/results.json (the browser's timings and the page's download size) and exits non-zero on a
// failure, saying which.
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync, mkdirSync, statSync, readdirSync, rmSync } from 'node:fs';
import { createHash } from 'node:crypto';
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

// ---- 5. lesson 1, taken by clicks ----------------------------------------------------------------------
// An immediate-mode UI has no page elements: with ?test=1 the app records where Dear ImGui laid out each
// item (web/test_hooks.cpp), Module.tttlabTest.find(label, scope) says where it is on the page, and the
// test sends the browser the events a student's mouse and keyboard would. Nothing is set from inside.
const kProgressFile = '/persist/course-progress.json';  // course/progress.hpp, in the page's IndexedDB folder
const kWheelPx = 100;  // one notch of a mouse wheel, as browsers report it

// Polls probe() until ok(its answer), every 50 ms; throws `what` when timeoutMs pass first.
async function until(what, probe, ok, timeoutMs) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const got = await probe();
    if (ok(got)) return got;
    if (Date.now() > end) throw new Error(`${what} (waited ${(timeoutMs / 1000).toFixed(0)} s)`);
    await sleep(50);
  }
}

class Student {
  constructor(page) {
    this.page = page;
    this.mouseAt = null;
  }
  find(label, scope = []) {
    return this.page.evaluate(`Module.tttlabTest.find(${JSON.stringify(label)}, ${JSON.stringify(scope)})`);
  }
  // Until the app has drawn n frames more (each input event makes frames; an idle page draws 4 a second).
  async frames(n = 1) {
    const f0 = await this.page.evaluate('Module.tttlabTest.frame()');
    await until('the page stopped drawing frames', () => this.page.evaluate('Module.tttlabTest.frame()'),
      (f) => f >= f0 + n, 15000);
  }
  async moveTo(x, y) {
    if (this.mouseAt && this.mouseAt[0] === x && this.mouseAt[1] === y) return;
    await this.page.mouse('mouseMoved', x, y);
    this.mouseAt = [x, y];
    await this.frames(1);
  }
  // The index-th item labelled `label` inside `scope`, scrolled into its window where it is not, by
  // turns of the mouse wheel over that window: one notch first, to learn how far a notch goes, then as
  // many at once (10 at most) as bring the item to the middle of the window.
  async show(label, scope, index = 0) {
    let perNotch = 0;
    for (let turn = 0; turn < 50; ++turn) {
      const { items } = await until(`no item "${label}" in ${JSON.stringify(scope)} on the page`,
        () => this.find(label, scope), (r) => r.items.length > index, 15000);
      const item = items[index];
      if (item.shown) return item;
      const { clip } = item;
      const below = item.y + item.h / 2 - (clip.y + clip.h / 2);
      const notches = perNotch > 0 ? Math.min(10, Math.max(1, Math.round(Math.abs(below) / perNotch))) : 1;
      await this.moveTo(clip.x + clip.w / 2, clip.y + clip.h / 2);
      for (let k = 0; k < notches; ++k)
        await this.page.wheel(clip.x + clip.w / 2, clip.y + clip.h / 2, Math.sign(below) * kWheelPx);
      await this.frames(2);
      const after = (await this.find(label, scope)).items[index];
      const moved = after ? (after.y - item.y) * -Math.sign(below) : 0;
      if (after && !after.shown && moved <= 0)
        throw new Error(`"${label}" is outside its window at y = ${item.y.toFixed(0)} and ${notches} ` +
          `notch(es) of the mouse wheel ${moved < 0 ? 'scrolled it the wrong way' : 'did not scroll it'} (window ` +
          `scrolled ${item.scroll.toFixed(0)} of ${item.scroll_max.toFixed(0)} px)`);
      perNotch = moved / notches;
    }
    throw new Error(`50 turns of the mouse wheel did not bring "${label}" into its window`);
  }
  // A click in the middle of the item: move, press, release, a frame apart as a hand would.
  async click(label, scope, index = 0) {
    const item = await this.show(label, scope, index);
    const x = item.x + item.w / 2, y = item.y + item.h / 2;
    await this.moveTo(x, y);
    await this.page.mouse('mousePressed', x, y);
    await this.frames(1);
    await this.page.mouse('mouseReleased', x, y);
    await this.frames(2);
    return item;
  }
  async type(text) {
    await this.page.typeKeys(text);
    await this.frames(2);
  }
  // The app's own record of the course, as it saved it, or null before it has saved one.
  progress() {
    return this.page.evaluate(`(() => { try { return JSON.parse(Module.FS.readFile(${JSON.stringify(kProgressFile)}, ` +
      `{ encoding: 'utf8' })); } catch (e) { return null; } })()`);
  }
  // Until the saved record of lesson `lesson` satisfies ok(record); throws saying what was not saved
  // (`expected`) and what the record holds.
  async saved(expected, lesson, ok, timeoutMs = 10000) {
    let last = null;
    try {
      return await until(`not saved: ${expected}`, async () => (last = ((await this.progress()) || {}).lessons?.[lesson] || null),
        (r) => r !== null && ok(r), timeoutMs);
    } catch (e) {
      throw new Error(`${e.message}; ${kProgressFile} has for ${lesson}: ${JSON.stringify(last)}`);
    }
  }
}

// Lesson 1 (lessons/01-one-step-per-token.md) as a student takes it: predict the rank, lock it in, run
// the experiment, read the reveal, lock the second prediction, then answer two exercises (one wrongly),
// and check each with the button. Each step is checked in what the app saved, not on the screen alone.
async function takeLesson(page, base, out) {
  const lesson = '01-one-step-per-token';
  const rank = ['prediction', 0], ownLoss = ['prediction', 1];
  const stateSize = ['exercise', 0], modelState = ['exercise', 1];
  const s = new Student(page);
  let step = 'open lesson 1';
  const started = Date.now();
  try {
    await page.goto('about:blank');
    await page.goto(`${base}index.html?lesson=01&test=1`);
    await page.waitForConsole(/^TTTLAB_FIRST_FRAME /, 90000);
    await page.waitForConsole(/^TTTLAB_SETTLED /, 180000);
    if ((await s.progress())?.lessons?.[lesson]) throw new Error('the fresh browser profile already has progress for lesson 1');

    step = 'predict: choose "31" for the rank and lock it in';
    // The second answer of the first prediction: "31: one direction is never touched."
    await s.click('##choice', [...rank, 1]);
    await s.click('Lock in my prediction', rank);
    await s.saved('the rank prediction locked in with answer 1', lesson,
      (r) => r.predictions?.rank?.choice === 1 && r.predictions.rank.committed_at);

    step = 'run the experiment and wait for the reveal';
    await s.click('Run the experiment', rank);
    // The reveal card has "Predict again" under THE ENGINE MEASURED: it shows once the engine measured.
    await until('no reveal ("Predict again") on the page', () => s.find('Predict again', rank),
      (r) => r.items.length > 0, 120000);
    const reveal = await s.saved('the rank prediction revealed', lesson, (r) => r.predictions?.rank?.revealed === true);
    const p = reveal.predictions.rank;
    // The lesson's answer: the LayerNorm keeps one direction of 32 untouched, so the rank is 31.
    if (!(Math.abs(p.measured - 31) < 0.5 && p.right === true))
      throw new Error(`the saved verdict is measured ${p.measured}, right ${p.right}; the engine should measure a rank ` +
        'of 31, which makes the locked answer right');
    ok(`lesson 1: predicted 31, the engine measured ${p.measured}: marked right`);

    step = 'predict the second question and lock it in';
    await s.click('##choice', [...ownLoss, 0]);
    await s.click('Lock in my prediction', ownLoss);
    await s.saved('the own-loss prediction locked in with answer 0', lesson,
      (r) => r.predictions?.['own-loss']?.choice === 0);

    // Types an answer into an exercise's box, clicks Check, and returns what the app saved of it.
    const answer = async (id, scope, text) => {
      await s.click('##answer', scope);
      await s.type(text);
      await s.click('Check my answer', scope);
      return (await s.saved(`one attempt at ${id}`, lesson, (r) => r.exercises?.[id]?.attempts === 1)).exercises[id];
    };

    step = 'exercise model-state: a wrong answer';
    const wrong = await answer('model-state', modelState, '16384');
    if (wrong.right !== false || wrong.answer !== '16384')
      throw new Error(`saved as ${JSON.stringify(wrong)}, not a wrong answer 16384`);
    ok('lesson 1: exercise model-state: 16384 marked wrong');

    step = 'exercise state-size: d^2 + d';
    const right = await answer('state-size', stateSize, 'd^2 + d');
    if (right.right !== true || right.answer !== 'd^2 + d')
      throw new Error(`saved as ${JSON.stringify(right)}, not a right answer d^2 + d`);
    // On the screen too: a solved card no longer offers its answer; the unsolved one still does.
    await s.frames(1);
    if ((await s.find('Show the answer', stateSize)).items.length !== 0 ||
        (await s.find('Show the answer', modelState)).items.length !== 1)
      throw new Error('the cards do not show state-size solved and model-state open ("Show the answer")');
    ok('lesson 1: exercise state-size: d^2 + d marked right');

    step = 'screenshot';
    const file = path.join(out, 'lesson-01-taken.png');
    await page.screenshot(file);
    return { seconds: (Date.now() - started) / 1000, file };
  } catch (e) {
    await page.screenshot(path.join(out, 'lesson-01-failed.png')).catch(() => {});
    throw new Error(`lesson 1, step "${step}": ${e.message}`);
  }
}

// ---- 6. a tiny model trained in the Training panel, by clicks --------------------------------------------
// The panel's defaults (the tiny preset, seed 0, one thread) with a short run, set as a student sets a
// slider to an exact number: Ctrl+click makes it a box to type in. The run's own files (read from the
// page) must show it trained and saved; a click on its checkpoint must download the checkpoint's two files.
const kTrainSteps = 20;  // of 8 sequences × 128 bytes: about half a minute on one thread in the tab
const kTrainEvery = 10;  // validation and a checkpoint at steps 10 and 20
const kTrainDrop = 1.0;  // nats: how much lower the last three steps' loss is than the first three's, at least
const kRunsRoot = '/persist/runs';  // where the panel's runs go in the browser (its Folder, "runs", in the lab's folder)

async function setSlider(s, label, value) {
  const item = await s.show(label, []);
  const x = item.x + item.w / 2, y = item.y + item.h / 2;
  await s.moveTo(x, y);
  await s.page.keyDown('Control', 'ControlLeft', 17, 2);
  await s.page.mouse('mousePressed', x, y, 2);
  await s.frames(1);
  await s.page.mouse('mouseReleased', x, y, 2);
  await s.page.keyUp('Control', 'ControlLeft', 17);
  await s.frames(2);
  await s.type(String(value));  // the box starts with its number selected: typing replaces it
  await s.page.key('Enter', 'Enter', 13);
  await s.frames(2);
}

// A file of the page's file system: its text (utf8) or, for binary files, its size and SHA-256; null
// when it is not there.
function pageFile(page, file, binary = false) {
  const f = JSON.stringify(file);
  return page.evaluate(binary
    ? `(async () => { try { const b = Module.FS.readFile(${f}); const h = await crypto.subtle.digest('SHA-256', b.slice()); ` +
      `return { size: b.length, sha256: Array.from(new Uint8Array(h), (x) => x.toString(16).padStart(2, '0')).join('') }; } ` +
      `catch (e) { return null; } })()`
    : `(() => { try { return Module.FS.readFile(${f}, { encoding: 'utf8' }); } catch (e) { return null; } })()`);
}

async function trainInTheTab(page, browser, base, out) {
  const s = new Student(page);
  let step = 'open the Training panel';
  const started = Date.now();
  try {
    await page.goto('about:blank');
    await page.goto(`${base}index.html?panel=training&test=1`);
    await page.waitForConsole(/^TTTLAB_FIRST_FRAME /, 90000);
    await page.waitForConsole(/^TTTLAB_SETTLED /, 180000);

    step = `set the run short: ${kTrainSteps} steps, validation and a checkpoint every ${kTrainEvery}`;
    await setSlider(s, '##steps', kTrainSteps);
    await setSlider(s, '##eval', kTrainEvery);
    await setSlider(s, '##checkpoint', kTrainEvery);

    step = 'start the run';
    const listRuns = () => page.evaluate(`(() => { try { return Module.FS.readdir(${JSON.stringify(kRunsRoot)})` +
      `.filter((n) => n !== '.' && n !== '..'); } catch (e) { return []; } })()`);
    if ((await listRuns()).length) throw new Error(`the fresh browser profile already has runs in ${kRunsRoot}`);
    await s.click('Start a run');
    const [name] = await until(`no run directory appeared in ${kRunsRoot}`, listRuns, (r) => r.length > 0, 15000);
    const dir = `${kRunsRoot}/${name}`;
    const last = `step-${String(kTrainSteps).padStart(7, '0')}`;

    step = `train ${kTrainSteps} steps and save the checkpoint ${last}`;
    const trainStart = Date.now();
    // The run's last checkpoint is saved, and the panel offers to start another run (none is training).
    await until(`${dir}/latest does not name ${last}, or the panel does not offer "Start a run" again`,
      async () => ((await pageFile(page, `${dir}/latest`)) || '').trim() === last &&
        (await s.find('Start a run')).items.length > 0, (done) => done, 90000);
    const trainSeconds = (Date.now() - trainStart) / 1000;

    step = 'read the run\'s settings and metrics';
    const config = JSON.parse(await pageFile(page, `${dir}/train_config.json`));
    if (config.steps !== kTrainSteps || config.eval_every !== kTrainEvery || config.checkpoint_every !== kTrainEvery)
      throw new Error(`the run trained with steps ${config.steps}, eval_every ${config.eval_every}, checkpoint_every ` +
        `${config.checkpoint_every}: not what the sliders were set to (${kTrainSteps}, ${kTrainEvery}, ${kTrainEvery})`);
    const records = (await pageFile(page, `${dir}/metrics.jsonl`)).split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
    const steps = records.filter((r) => r.loss !== undefined);
    const evals = records.filter((r) => r.val_loss !== undefined);
    const losses = steps.map((r) => r.loss);
    if (steps.length !== kTrainSteps || steps.some((r, i) => r.step !== i + 1))
      throw new Error(`metrics.jsonl has steps ${steps.map((r) => r.step).join(' ')}, not 1 … ${kTrainSteps}`);
    if (!losses.every((x) => Number.isFinite(x) && x > 0) || steps.some((r) => r.skipped))
      throw new Error(`a training loss is not finite or a step was skipped: ${losses.join(' ')}`);
    if (evals.map((r) => r.step).join(' ') !== `${kTrainEvery} ${kTrainSteps}` || !evals.every((r) => Number.isFinite(r.val_loss)))
      throw new Error(`the validations are ${JSON.stringify(evals.map((r) => [r.step, r.val_loss]))}, not finite losses at ` +
        `steps ${kTrainEvery} and ${kTrainSteps}`);
    // An untrained byte-level model guesses about uniformly over 256 bytes: ln 256 = 5.55 nats. With
    // this seed the loss falls steadily from there, and the second validation is lower than the first.
    const head = losses.slice(0, 3).reduce((a, b) => a + b) / 3, tail = losses.slice(-3).reduce((a, b) => a + b) / 3;
    const [v1, v2] = evals.map((r) => r.val_loss);
    const numbers = `training loss ${losses.map((x) => x.toFixed(3)).join(' ')} nats; validation ${v1.toFixed(4)} at step ` +
      `${kTrainEvery}, ${v2.toFixed(4)} at step ${kTrainSteps}`;
    ok(`training: ${numbers}`);
    if (!(Math.abs(losses[0] - Math.log(256)) < 0.5))
      throw new Error(`the first step's loss is ${losses[0]}, not about ln 256 = 5.55 nats (an untrained model)`);
    if (!(tail < head - kTrainDrop && v2 < v1))
      throw new Error(`the loss did not fall: the first three steps average ${head.toFixed(3)}, the last three ` +
        `${tail.toFixed(3)} (expected ${kTrainDrop} nats lower at least); validation ${v1} then ${v2}`);

    step = `click the checkpoint ${last} and download its two files`;
    const ckpt = `${dir}/${last}`;
    const downloads = path.resolve(out, 'downloads');
    rmSync(downloads, { recursive: true, force: true });
    await browser.allowDownloads(downloads);
    const already = browser.downloads.length;
    // The cell shows "step-0000020", or "20" where the column is narrow.
    const cell = (await s.find(last)).items.length ? last : String(kTrainSteps);
    await s.click(cell);
    const want = ['config.json', 'model.safetensors'];
    let got = [];
    try {
      await until('the downloads did not complete', () => (got = browser.downloads.slice(already)),
        (d) => want.every((n) => d.some((x) => x.name === n && x.state === 'completed')), 20000);
    } catch (e) {
      throw new Error(`${e.message}: the browser has ${JSON.stringify(got.map((d) => [d.name, d.state]))}, ` +
        `not ${want.join(' and ')}, each completed`);
    }
    const cfgText = readFileSync(path.join(downloads, 'config.json'), 'utf8');
    let cfg;
    try { cfg = JSON.parse(cfgText); } catch (e) { throw new Error(`the downloaded config.json does not parse: ${e.message}`); }
    if (cfg.hidden_size !== 128 || cfg.num_hidden_layers !== 4 || cfg.tttlab_seq_layer !== 'ttt-linear')
      throw new Error(`the downloaded config.json is not the tiny TTT-Linear model: ${cfgText.slice(0, 200)}`);
    if (cfgText !== await pageFile(page, `${ckpt}/config.json`)) throw new Error('the downloaded config.json differs from the page\'s');
    const model = readFileSync(path.join(downloads, 'model.safetensors'));
    const inPage = await pageFile(page, `${ckpt}/model.safetensors`, true);
    const sha = createHash('sha256').update(model).digest('hex');
    if (!inPage || model.length !== inPage.size || sha !== inPage.sha256)
      throw new Error(`the downloaded model.safetensors (${model.length} bytes, sha256 ${sha}) is not the page's ` +
        `(${JSON.stringify(inPage)})`);
    // A safetensors file: an 8-byte little-endian header size, the JSON header (with the step saved).
    const header = JSON.parse(model.subarray(8, 8 + Number(model.readBigUInt64LE(0))).toString('utf8'));
    if (header.__metadata__?.tttlab_step !== String(kTrainSteps))
      throw new Error(`the downloaded model.safetensors says step ${header.__metadata__?.tttlab_step}, not ${kTrainSteps}`);
    ok(`training: downloaded ${ckpt}: config.json and model.safetensors (${model.length} bytes, the page's own)`);

    step = 'screenshot';
    await s.moveTo(100, 650);  // off the checkpoint cell, whose tooltip would hide the run's cards
    const file = path.join(out, 'training-taken.png');
    await page.screenshot(file);

    step = 'reload the page: the run is still there';
    // /persist reaches the browser's IndexedDB at least every 15 s (host_web.cpp): once the checkpoint is
    // stored there, a reload must find it again in the page.
    const stored = `(() => new Promise((resolve) => { const r = indexedDB.open('/persist'); r.onerror = () => resolve(false); ` +
      `r.onsuccess = () => { const db = r.result; try { const g = db.transaction(['FILE_DATA'], 'readonly').objectStore('FILE_DATA')` +
      `.getKey(${JSON.stringify(`${ckpt}/model.safetensors`)}); g.onsuccess = () => { db.close(); resolve(g.result !== undefined); }; ` +
      `g.onerror = () => { db.close(); resolve(false); }; } catch (e) { db.close(); resolve(false); } }; }))()`;
    await until(`${ckpt}/model.safetensors did not reach IndexedDB`, () => page.evaluate(stored), (x) => x, 40000);
    await page.goto('about:blank');
    await page.goto(`${base}index.html?panel=training&test=1`);
    await page.waitForConsole(/^TTTLAB_FIRST_FRAME /, 90000);
    await page.waitForConsole(/^TTTLAB_SETTLED /, 180000);
    const reloaded = await pageFile(page, `${ckpt}/model.safetensors`, true);
    if (!reloaded || reloaded.sha256 !== inPage.sha256)
      throw new Error(`after a reload the page has ${JSON.stringify(reloaded)} for ${ckpt}/model.safetensors, not the run's`);
    ok(`training: after a reload the page still has ${ckpt}`);

    return { seconds: (Date.now() - started) / 1000, trainSeconds, losses, validation: [v1, v2], file };
  } catch (e) {
    await page.screenshot(path.join(out, 'training-failed.png')).catch(() => {});
    throw new Error(`training in the tab, step "${step}": ${e.message}`);
  }
}

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

  // 5: lesson 1, taken by clicks.
  if (!args.bench) {
    try {
      const taken = await takeLesson(page, base, out);
      checkErrors('lesson 1 taken');
      results.lesson_seconds = taken.seconds;
      ok(`lesson 1 taken by clicks in ${taken.seconds.toFixed(1)} s (${taken.file})`);
    } catch (e) {
      fail(e.message);
    }
    try {
      const trained = await trainInTheTab(page, browser, base, out);
      checkErrors('training in the tab');
      results.training = trained;
      ok(`training: ${kTrainSteps} steps in ${trained.trainSeconds.toFixed(1)} s, the whole part in ` +
        `${trained.seconds.toFixed(1)} s (${trained.file})`);
    } catch (e) {
      fail(e.message);
    }
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
