/**
 * The HTML report in a real browser (Debian's headless Chromium, network cut off): it parses into
 * the matrix, verdict and chart the unit test reads in the markup, and renders at desktop and
 * phone widths. The screenshots are kept with PRESTAGE_TESTBED_KEEP, to look at.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PREFLIGHT_API_VERSION, type PreflightNode, type StagingReport } from '../src/api/preflight.js';
import { renderReportHtml } from '../src/render/report-html.js';
import { renderPage } from './harness/chromium.js';
import { removeTempDirs, tempDir } from './support/temp-files.js';

const GiB = 2 ** 30;
const NODES = ['master-0', 'worker-0', 'worker-1'];
const SETS = ['prestage-4.16.3-control-plane', 'prestage-4.16.3-worker'];

const preflightNode = (node: string, verdict: PreflightNode['verdict']): PreflightNode => ({
  node, sets: [], images: 40, present: 10, pulls: 30, fetchBytes: 3 * GiB, writeBytes: 7 * GiB,
  storage: { rule: 'agent', availableBytes: 20 * GiB, reserveBytes: 4 * GiB, neededBytes: 7 * GiB },
  heldFrom: 'agent', verdict, reasons: verdict === 'GO' ? [] : [`${node}: image filesystem 2.0 GiB short of 7.0 GiB`],
});

const report: StagingReport = {
  apiVersion: PREFLIGHT_API_VERSION, kind: 'StagingReport', time: '2025-03-01T08:30:00Z', backend: 'agent',
  sets: SETS, nodes: NODES,
  cells: [
    { node: 'master-0', set: SETS[0]!, state: 'ready', images: 30, pulled: 30, bytes: 5 * GiB, pulledBytes: 5 * GiB },
    { node: 'worker-0', set: SETS[1]!, state: 'pulling', images: 20, pulled: 8, bytes: 4 * GiB, pulledBytes: GiB },
    { node: 'worker-1', set: SETS[1]!, state: 'failed', images: 20, pulled: 2, error: 'pull failed: manifest unknown' },
  ],
  preflight: {
    apiVersion: PREFLIGHT_API_VERSION, kind: 'Preflight', time: '2025-03-01T08:00:00Z', backend: 'agent',
    verdict: 'NO-GO', reasons: ['worker-1: image filesystem 2.0 GiB short of 7.0 GiB'], sets: SETS,
    nodes: [preflightNode('master-0', 'GO'), preflightNode('worker-0', 'GO'), preflightNode('worker-1', 'NO-GO')],
    totals: { nodes: 3, fetchBytes: 9 * GiB, linkBytes: 4 * GiB, writeBytes: 21 * GiB },
    eta: { seconds: 3_700, bytesPerSecond: 20 * 2 ** 20, rateFrom: 'cap', pullSeconds: 40, doneBy: '2025-03-01T09:02:00Z', window: { opens: '2025-03-01T08:00:00Z', closes: '2025-03-01T12:00:00Z', fits: true } },
    assumptions: ['worker-0: free space from allocatable ephemeral storage'],
  },
  link: {
    capBytesPerSecond: 20 * 2 ** 20, source: 'agent ledger',
    samples: Array.from({ length: 12 }, (_, i) => ({ time: `2025-03-01T08:${String(10 + i)}:00Z`, bytesPerSecond: (10 + (i % 5) * 2) * 2 ** 20 })),
  },
  errors: [{ node: 'worker-1', set: SETS[1]!, error: 'pull failed: manifest unknown' }],
};

/** The values of `attribute` on every `tag` of the serialised DOM (Chromium quotes attributes with "). */
const attributeValues = (dom: string, tag: string, attribute: string): string[] =>
  [...dom.matchAll(new RegExp(`<${tag}\\b[^>]*\\s${attribute}="([^"]*)"`, 'g'))].map((m) => m[1]!);

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
/** Width and height from a PNG's IHDR chunk, which follows its signature. */
const pngSize = (png: Buffer) => ({ width: png.readUInt32BE(16), height: png.readUInt32BE(20) });

let desktop: { dom: string; png: Buffer };
let phone: { dom: string; png: Buffer };

beforeAll(async () => {
  const dir = await tempDir('prestage-report-html-');
  const page = join(dir, 'report.html');
  await writeFile(page, renderReportHtml(report));
  const shot = async (name: string, width: number, height: number) => {
    const screenshot = join(dir, name);
    const { dom } = await renderPage(page, { screenshot, width, height });
    return { dom, png: await readFile(screenshot) };
  };
  desktop = await shot('desktop.png', 1200, 1400);
  phone = await shot('phone.png', 390, 844);
}, 240_000);

afterAll(removeTempDirs);

describe('the HTML report in headless Chromium', () => {
  it('parses into a row per node and a column per set', () => {
    for (const { dom } of [desktop, phone]) {
      expect(attributeValues(dom, 'th', 'data-node')).toEqual(NODES);
      expect(attributeValues(dom, 'th', 'data-set')).toEqual(SETS);
      expect(attributeValues(dom, 'td', 'data-state')).toEqual(['ready', 'untargeted', 'untargeted', 'pulling', 'untargeted', 'failed']);
    }
  });

  it('shows the verdict, its reason and the error', () => {
    expect(desktop.dom).toMatch(/<p [^>]*\bid="verdict"[^>]*>NO-GO<\/p>/);
    expect(desktop.dom).toMatch(/<ul id="reasons"><li>worker-1: image filesystem 2\.0 GiB short/);
    expect(desktop.dom).toMatch(/<ul id="errors"><li><strong>worker-1<\/strong>, prestage-4\.16\.3-worker: <code>pull failed: manifest unknown<\/code>/);
  });

  it('keeps the chart, its cap line and its table', () => {
    expect(desktop.dom.match(/<rect class="bar"/g)).toHaveLength(12);
    expect(desktop.dom).toMatch(/<line class="cap"[^>]*stroke-dasharray="6 4"/);
    expect(desktop.dom).toContain('<caption>Link use (agent ledger)</caption>');
  });

  it('renders at desktop and phone widths', () => {
    for (const [{ png }, width, height] of [[desktop, 1200, 1400], [phone, 390, 844]] as const) {
      expect(png.subarray(0, 8).equals(PNG_SIGNATURE)).toBe(true);
      expect(pngSize(png)).toEqual({ width, height });
      // A blank 1200 x 1400 page compresses to under 8 kB; the report's are over 50 kB.
      expect(png.length).toBeGreaterThan(20_000);
    }
  });
});
