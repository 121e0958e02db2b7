// What a reader does with the reports, in headless Chromium (Debian's, driven by playwright-core):
//   live:  a running run's report.html has its header filled (model, device, mode, wall) and
//          links only to files that exist, reloads itself and shows the next round once the run
//          rewrites it (here: state.json moved on and agents/report.lua run again);
//   links: an attempt's kernel link opens its kernel.py, its "diff vs" link draws the diff
//          against its parent, tagged as a change (never RENAMED);
//   index: runs/index.html sorts by a column on a click (and back on a second), the box filters
//          the rows, and the chart of every run's confirmed speedups is drawn.
//
//   node tests/browser/check_live.js OUT_DIR KAGENT_BIN LIVE_RUN_DIR CPU_REPORT.html MANY_INDEX.html
// Prints one JSON line per check; exits 1 when any fails.
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const { chromium } = require('playwright-core');

const CHROMIUM = process.env.KAGENT_CHROMIUM || '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'];
const root = path.resolve(__dirname, '..', '..');

// header(page) -> {name: value} of the report's header rows
function header(page) {
  return page.$$eval('.kv > div', (divs) => {
    const out = {};
    for (let i = 0; i + 1 < divs.length; i += 2) out[divs[i].textContent.trim()] = divs[i + 1];
    return Object.fromEntries(Object.entries(out).map(([k, el]) => [k, {
      text: el.textContent.trim(), links: Array.from(el.querySelectorAll('a')).map((a) => a.getAttribute('href')) }]));
  });
}

// the diff's file tags (diff2html: CHANGED, RENAMED, ...): a kernel diff is never a rename
async function noRenamed(page, what) {
  const tags = await page.$$eval('#diff .d2h-tag', (els) => els.map((e) => e.textContent.trim()));
  if (tags.includes('RENAMED')) throw new Error(`${what}: the diff is tagged RENAMED (${tags})`);
  return tags;
}

async function live(page, bin, dir) {
  await page.goto('file://' + path.join(dir, 'report.html'));
  const before = await page.textContent('#running');
  if (!/round 0 of/.test(before)) throw new Error(`the running page says "${before}"`);
  // the header is filled from the start, as the status line is; links only to files there
  const h = await header(page);
  for (const k of ['model', 'device, dtype', 'policy / mode', 'wall']) {
    if (!h[k] || /^-|\/ -$/.test(h[k].text)) throw new Error(`the running page's ${k} is "${h[k] && h[k].text}"`);
  }
  for (const f of h.files.links) {
    if (!fs.existsSync(path.join(dir, f))) throw new Error(`the running page links ${f}, which is not there`);
  }
  if (h.files.links.includes('summary.json')) throw new Error('a link to summary.json before it exists');
  const st = JSON.parse(fs.readFileSync(path.join(dir, 'state.json'), 'utf8'));
  st.round = 1;
  fs.writeFileSync(path.join(dir, 'state.json'), JSON.stringify(st));
  execFileSync(bin, ['--log-level', 'warn', path.join(root, 'agents', 'report.lua'), dir], { stdio: 'ignore' });
  // the page reloads itself (meta refresh): no reload from here
  await page.waitForFunction(() => /round 1 of/.test((document.getElementById('running') || {}).textContent || ''),
    null, { timeout: 30000 });
  return { before: before.trim(), after: (await page.textContent('#running')).trim() };
}

async function links(page, report) {
  await page.goto('file://' + report);
  const kernel = page.locator('#rounds a', { hasText: 'kernel' }).first();
  const href = await kernel.getAttribute('href');
  await Promise.all([page.waitForNavigation(), kernel.click()]);
  const text = await page.textContent('body');
  if (!page.url().endsWith(href) || !/class ModelNew|def /.test(text)) throw new Error(`kernel link ${href} opened ${page.url()}`);
  await page.goBack();
  const diff = page.locator('a.diff-link').first();
  const want = `${await diff.getAttribute('data-parent')} -> ${await diff.getAttribute('data-id')}`;
  await diff.click();
  await page.waitForSelector(`#diff[data-shown="${want}"]`, { timeout: 10000 });
  const rows = await page.locator('#diff .d2h-diff-tbody tr').count();
  if (rows < 1) throw new Error('the attempt diff has no rows');
  const tags = await noRenamed(page, 'the attempt diff');
  return { kernel: href, diff: want, rows, tags };
}

async function index(page, file) {
  await page.goto('file://' + file);
  await page.waitForSelector('body[data-charts-done]', { timeout: 60000 });
  const col = await page.$$eval('#runs th', (ths) => ths.findIndex((th) => th.textContent === 'best ms'));
  const times = () => page.$$eval('#runs tbody tr', (trs, i) => trs.map((tr) => parseFloat(tr.cells[i].textContent)), col);
  await page.click('#runs th:has-text("best ms")');
  const up = await times();
  await page.click('#runs th:has-text("best ms")');
  const down = await times();
  const sorted = (a, sign) => a.every((v, i) => i === 0 || sign * (v - a[i - 1]) >= 0);
  if (!(up.length === 3 && sorted(up, 1) && sorted(down, -1))) throw new Error(`not sorted: ${up} / ${down}`);
  await page.fill('#filter', '120002');
  const shown = await page.getAttribute('#runs', 'data-shown');
  if (shown !== '1') throw new Error(`the filter kept ${shown} rows`);
  const chart = await page.$eval('div[data-spec="spec-speedups"]', (el) => el.getAttribute('data-rendered'));
  if (chart !== '1') throw new Error('the chart of confirmed speedups is not drawn');
  return { up, down, filtered: shown };
}

async function main() {
  const [outDir, bin, liveDir, report, many] = process.argv.slice(2);
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
  let failed = false;
  try {
    for (const [name, fn] of [['live', () => live(page, bin, liveDir)], ['links', () => links(page, report)],
      ['index', () => index(page, many)]]) {
      var page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
      const errors = [];
      page.on('pageerror', (e) => errors.push(e.message));
      page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
      try {
        const res = await fn();
        if (errors.length) throw new Error(errors.join('; '));
        console.log(JSON.stringify({ check: name, ok: true, ...res }));
      } catch (e) {
        failed = true;
        console.log(JSON.stringify({ check: name, ok: false, error: String(e && e.message || e) }));
        await page.screenshot({ path: path.join(outDir, `${name}_failed.png`), fullPage: true }).catch(() => {});
      }
    }
  } finally {
    await browser.close();
  }
  process.exit(failed ? 1 : 0);
}

main().catch((e) => { console.error(e); process.exit(1); });
