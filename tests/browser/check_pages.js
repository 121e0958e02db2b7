// Opens kagent-rt report pages in headless Chromium (Debian's, driven by playwright-core) and
// checks that they work from disk with no network: no console error, no page error, no request
// that leaves file://, every chart drawn as SVG marks, every table with rows, the diff drawn and
// highlighted. Saves a full-page screenshot of each page.
//
//   node tests/browser/check_pages.js OUT_DIR PAGE.html EXPECT_JSON [PAGE.html EXPECT_JSON ...]
//
// EXPECT_JSON: {"name": "report", "charts": ["spec-convergence", ...], "tables": ["rounds", ...],
// "diff": true | "highlighted", "text": ["words the page must show"]}. Prints one JSON line per page; exits 1
// when any check fails, 77 when no Chromium is installed.
const fs = require('fs');
const path = require('path');

const CHROMIUM = process.env.KAGENT_CHROMIUM || '/usr/bin/chromium';
if (!fs.existsSync(CHROMIUM)) {
  console.log(`SKIP: no Chromium at ${CHROMIUM} (scripts/setup.sh installs Debian's chromium)`);
  process.exit(77);
}
const { chromium } = require('playwright-core');

const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

async function checkPage(browser, file, expect, outDir) {
  const failures = [];
  const warnings = [];
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const page = await context.newPage();
  // anything but the page itself is a request the page must not make
  await page.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith('file://')) return route.continue();
    failures.push(`network request: ${url}`);
    return route.abort();
  });
  page.on('console', (msg) => {
    if (msg.type() === 'error') failures.push(`console error: ${msg.text()}`);
    else if (msg.type() === 'warning') warnings.push(msg.text());
  });
  page.on('pageerror', (err) => failures.push(`page error: ${err.message}`));
  page.on('requestfailed', (req) => {
    if (req.url().startsWith('file://')) failures.push(`failed to load ${req.url()}`);
  });
  await page.goto('file://' + path.resolve(file), { waitUntil: 'load' });
  const charts = expect.charts || [];
  if (charts.length > 0) {
    await page.waitForSelector('body[data-charts-done]', { timeout: 60000 }).catch(() => {
      failures.push('charts did not finish rendering within 60 s');
    });
  }
  const found = await page.evaluate(() => {
    const out = { charts: {}, tables: {}, diff: null, text: document.body.innerText };
    document.querySelectorAll('div.chart[data-spec]').forEach((el) => {
      const svg = el.querySelector('svg');
      out.charts[el.getAttribute('data-spec')] = {
        rendered: el.getAttribute('data-rendered') === '1',
        marks: svg ? svg.querySelectorAll('path, circle, rect, line, text').length : 0,
        width: svg ? svg.getBoundingClientRect().width : 0,
      };
    });
    document.querySelectorAll('table.data').forEach((t) => {
      out.tables[t.id || '(no id)'] = t.querySelectorAll('tbody tr').length;
    });
    const d = document.getElementById('diff');
    if (d) {
      out.diff = { rendered: d.getAttribute('data-rendered') === '1',
        rows: d.querySelectorAll('.d2h-diff-tbody tr').length,
        highlighted: d.querySelectorAll('.d2h-code-line-ctn .hljs-keyword, .d2h-code-line-ctn [class^="hljs-"]').length };
    }
    return out;
  });
  for (const id of charts) {
    const c = found.charts[id];
    if (!c) failures.push(`chart ${id} missing`);
    else if (!c.rendered || c.marks < 3 || c.width < 50) failures.push(`chart ${id} not drawn: ${JSON.stringify(c)}`);
  }
  for (const [id, c] of Object.entries(found.charts)) {
    if (!c.rendered) failures.push(`chart ${id} did not render`);
  }
  for (const id of expect.tables || []) {
    if (!(id in found.tables)) failures.push(`table ${id} missing`);
    else if (found.tables[id] < 1) failures.push(`table ${id} has no rows`);
  }
  if (expect.diff) {
    if (!found.diff || !found.diff.rendered || found.diff.rows < 1) failures.push(`diff not drawn: ${JSON.stringify(found.diff)}`);
    else if (expect.diff === 'highlighted' && found.diff.highlighted < 1) failures.push('diff has no syntax highlighting');
  }
  for (const words of expect.text || []) {
    if (!found.text.includes(words)) failures.push(`page does not show "${words}"`);
  }
  const shot = path.join(outDir, `${expect.name || path.basename(file, '.html')}.png`);
  await page.screenshot({ path: shot, fullPage: true });
  await context.close();
  return { page: file, screenshot: shot, charts: found.charts, tables: found.tables, diff: found.diff,
    warnings, failures };
}

async function main() {
  const [outDir, ...rest] = process.argv.slice(2);
  if (!outDir || rest.length === 0 || rest.length % 2 !== 0) {
    console.error('usage: node check_pages.js OUT_DIR PAGE.html EXPECT_JSON [PAGE.html EXPECT_JSON ...]');
    process.exit(2);
  }
  fs.mkdirSync(outDir, { recursive: true });
  let failed = false;
  // playwright starts Chromium with a fresh profile of its own (under TMPDIR) and removes it
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
  try {
    for (let i = 0; i < rest.length; i += 2) {
      const res = await checkPage(browser, rest[i], JSON.parse(rest[i + 1]), outDir);
      console.log(JSON.stringify(res.failures.length ? res : { page: res.page, screenshot: res.screenshot,
        charts: Object.keys(res.charts).length, tables: res.tables, diff: res.diff, warnings: res.warnings.length }));
      if (res.failures.length) failed = true;
    }
  } finally {
    await browser.close();
  }
  process.exit(failed ? 1 : 0);
}

main().catch((e) => { console.error(e); process.exit(1); });
