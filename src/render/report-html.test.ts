import { describe, expect, it } from 'vitest';
import { PREFLIGHT_API_VERSION, type Preflight, type PreflightNode, type StagingReport } from '../api/preflight.js';
import { escapeHtml } from './html.js';
import { renderReportHtml } from './report-html.js';

const GiB = 2 ** 30;
/** A node name as a hostile cluster could send it: quote, ampersand, angle bracket. */
const HOSTILE_NODE = 'worker-"&<1';
const HOSTILE_ERROR = 'pull failed: <script>alert(1)</script>';
const NODES = ['master-0', 'worker-0', HOSTILE_NODE];
const SETS = ['prestage-4.16.3-control-plane', 'prestage-4.16.3-worker'];

function preflightNode(node: string, verdict: PreflightNode['verdict']): PreflightNode {
  return {
    node, sets: [], images: 40, present: 10, pulls: 30, fetchBytes: 3 * GiB, writeBytes: 7 * GiB,
    storage: { rule: 'agent', availableBytes: 20 * GiB, reserveBytes: 4 * GiB, neededBytes: 7 * GiB },
    heldFrom: 'agent', verdict, reasons: verdict === 'GO' ? [] : [`${node}: 2.0 GiB short`],
  };
}

const preflight: Preflight = {
  apiVersion: PREFLIGHT_API_VERSION, kind: 'Preflight', time: '2025-03-01T08:00:00Z', backend: 'agent',
  verdict: 'NO-GO', reasons: [`${HOSTILE_NODE}: image filesystem 2.0 GiB short of 7.0 GiB`], sets: SETS,
  nodes: [preflightNode('master-0', 'GO'), preflightNode('worker-0', 'GO'), preflightNode(HOSTILE_NODE, 'NO-GO')],
  totals: { nodes: 3, fetchBytes: 9 * GiB, linkBytes: 4 * GiB, writeBytes: 21 * GiB },
  eta: { seconds: 3_700, bytesPerSecond: 20 * 2 ** 20, rateFrom: 'cap', pullSeconds: 40, doneBy: '2025-03-01T09:02:00Z', window: { opens: '2025-03-01T08:00:00Z', closes: '2025-03-01T12:00:00Z', fits: true } },
  assumptions: ['worker-0: free space from allocatable ephemeral storage'],
};

const report: StagingReport = {
  apiVersion: PREFLIGHT_API_VERSION, kind: 'StagingReport', time: '2025-03-01T08:30:00Z', backend: 'agent',
  sets: SETS, nodes: NODES,
  cells: [
    { node: 'master-0', set: SETS[0]!, state: 'ready', images: 30, pulled: 30, bytes: 5 * GiB, pulledBytes: 5 * GiB },
    { node: 'worker-0', set: SETS[1]!, state: 'pulling', images: 20, pulled: 8, bytes: 4 * GiB, pulledBytes: GiB },
    { node: HOSTILE_NODE, set: SETS[1]!, state: 'failed', images: 20, pulled: 2, error: HOSTILE_ERROR },
  ],
  preflight,
  link: {
    capBytesPerSecond: 20 * 2 ** 20, source: 'agent ledger',
    samples: [0, 1, 2, 3].map((i) => ({ time: `2025-03-01T08:${10 + i}:00Z`, bytesPerSecond: (12 + 2 * i) * 2 ** 20 })),
  },
  errors: [{ node: HOSTILE_NODE, set: SETS[1]!, error: `${HOSTILE_ERROR}\u001b[2K\u202e` }],
};

const out = renderReportHtml(report);

describe('renderReportHtml', () => {
  it('names every node and set, in its row and column headers', () => {
    for (const node of NODES) expect(out).toContain(`<th scope="row" data-node="${escapeHtml(node)}">${escapeHtml(node)}</th>`);
    for (const set of SETS) expect(out).toContain(`<th scope="col" data-set="${set}">${set}</th>`);
  });

  it('escapes hostile text, in elements and attributes, and drops its control characters', () => {
    expect(escapeHtml(HOSTILE_NODE)).toBe('worker-&quot;&amp;&lt;1');
    expect(out).not.toContain(HOSTILE_NODE);
    expect(out).toContain('data-node="worker-&quot;&amp;&lt;1"');
    expect(out).toContain('pull failed: &lt;script&gt;alert(1)&lt;/script&gt;');
    expect(out).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f\u202e]/);
  });

  it('fetches nothing and runs nothing', () => {
    expect(out).not.toMatch(/<script/i);
    for (const banned of ['http://', 'https://', 'src=', 'href=', 'url(', '@import']) expect(out, banned).not.toContain(banned);
    expect(out).toContain('<meta name="viewport" content="width=device-width, initial-scale=1">');
  });

  it('shows the verdict, its reasons and the ETA', () => {
    expect(out).toMatch(/<p id="verdict" class="verdict no-go">NO-GO<\/p>/);
    expect(out).toMatch(/<ul id="reasons"><li>worker-&quot;&amp;&lt;1: image filesystem 2\.0 GiB short/);
    expect(out).toContain('1h01m at 20 MiB/s');
    expect(out).toContain('fits: yes');
  });

  it('gives each cell its node, set and state, a missing one a dash', () => {
    expect(out).toContain(`<td class="pulling" data-node="worker-0" data-set="${SETS[1]}" data-state="pulling">`);
    expect(out).toContain('1.0 GiB of 4.0 GiB');
    expect(out).toContain('style="width:25%"');
    expect(out).toContain(`data-node="master-0" data-set="${SETS[1]}" data-state="untargeted">—</td>`);
    expect(out).toContain('? of ?');
    expect(out.match(/<td [^>]*data-node="[^"]*" data-set="[^"]*" data-state="[^"]*"/g)).toHaveLength(NODES.length * SETS.length);
  });

  it('charts the link against its cap, with a table of the same samples', () => {
    expect(out).toMatch(/<svg id="link"[^>]*>[\s\S]*stroke-dasharray[\s\S]*<\/svg>/);
    expect(out.match(/<rect class="bar"/g)).toHaveLength(4);
    expect(out.match(/<tr><td>2025-03-01T08:1\d:00Z<\/td>/g)).toHaveLength(4);
  });

  it('says none when there are no errors and no link samples', () => {
    const quiet = renderReportHtml({ ...report, preflight: undefined, link: undefined, errors: [] });
    expect(quiet).toContain('<ul id="errors"><li>none</li></ul>');
    expect(quiet).not.toContain('id="verdict"');
    expect(quiet).toContain('No link samples');
  });
});
