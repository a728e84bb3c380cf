/**
 * `prestage report` as one self-contained HTML file, to attach to a change ticket: the preflight's
 * verdict, the nodes x sets matrix, the link's use and the errors. No script, no stylesheet, font,
 * image or link to fetch, so it opens the same anywhere (offline, in a ticket viewer that strips
 * scripts, printed); every text from the cluster is escaped (html.ts).
 */
import type { Preflight, PreflightNode, ReportCell, StagingReport } from '../api/preflight.js';
import { formatBytes, formatRate, formatSeconds } from '../units.js';
import { html, type Markup } from './html.js';
import { linkChart } from './link-chart.js';

const STYLE = html`<style>
:root { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; font-size: 100%; line-height: 1.4; color: #1f2328; background: #fff; }
body { margin: 0 auto; padding: 1rem; max-width: 80rem; }
h1 { font-size: 1.6em; margin: 0 0 0.25em; }
h2 { font-size: 1.25em; margin: 1.5em 0 0.5em; }
.meta { color: #57606a; margin: 0; }
.verdict { display: inline-block; font-size: 2em; font-weight: bold; padding: 0.2em 0.8em; border: 0.15em solid; border-radius: 0.2em; margin: 0.5em 0; }
.verdict.go { background: #1a7f37; border-color: #1a7f37; color: #fff; }
.verdict.no-go { background: #cf222e; border-color: #cf222e; color: #fff; border-style: double; border-width: 0.3em; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 0.2em 1em; margin: 0.5em 0; }
dt { font-weight: bold; }
dd { margin: 0; }
.scroll { overflow-x: auto; -webkit-overflow-scrolling: touch; }
table { border-collapse: collapse; font-size: 0.9em; margin: 0.5em 0; }
th, td { border: 1px solid #d0d7de; padding: 0.3em 0.5em; text-align: left; vertical-align: top; }
thead th { background: #f6f8fa; }
#matrix td { min-width: 9em; }
#matrix th[scope="row"] { white-space: nowrap; }
.state { font-weight: bold; text-transform: uppercase; font-size: 0.85em; }
.ready { background: #dafbe1; } .pulling { background: #ddf4ff; } .waiting { background: #fff8c5; }
.failed { background: #ffebe9; } .pending, .untargeted { background: #f6f8fa; }
.progress { height: 0.4em; border: 1px solid #8c959f; margin-top: 0.2em; }
.progress > div { height: 100%; background: #0969da; }
.note { display: block; font-size: 0.85em; color: #57606a; overflow-wrap: anywhere; }
.verdict-no-go { font-weight: bold; }
#link { display: block; width: 100%; max-width: 40rem; height: auto; font-size: 11px; }
#link .bar { fill: #0969da; } #link .cap { stroke: #cf222e; stroke-width: 2; } #link .axis { stroke: #57606a; }
#errors li { overflow-wrap: anywhere; }
code { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 0.9em; }
@media print {
  :root { color: #000; }
  body { max-width: none; padding: 0; }
  .scroll { overflow: visible; }
  .verdict, .verdict.go, .verdict.no-go, thead th, td { background: none !important; color: #000; }
  .verdict.go, .verdict.no-go { border-color: #000; }
  .progress { border-color: #000; }
  .progress > div { background: none; border-bottom: 0.4em solid #000; height: 0; }
  tr, li, svg { break-inside: avoid; page-break-inside: avoid; }
  thead { display: table-header-group; }
}
</style>`;

const or = (n: number | undefined): string => (n === undefined ? '?' : formatBytes(n));
const verdictClass = (v: string): string => (v === 'GO' ? 'go' : 'no-go');

function list(id: string, items: readonly string[]): Markup {
  return html`<ul id="${id}">${items.length ? items.map((item) => html`<li>${item}</li>`) : html`<li>none</li>`}</ul>`;
}

function eta(e: Preflight['eta']): Markup {
  if (!e) return html`<dt>ETA</dt><dd>not estimated: no link rate known</dd>`;
  const window = e.window
    ? html`<dt>Window</dt><dd>${e.window.opens} to ${e.window.closes}; fits: ${e.window.fits ? 'yes' : 'no'}</dd>`
    : html``;
  return html`<dt>ETA</dt><dd>${formatSeconds(e.seconds)} at ${formatRate(e.bytesPerSecond)} (${e.rateFrom === 'cap' ? 'the cap' : 'measured'})</dd><dt>Done by</dt><dd>${e.doneBy}</dd>${window}`;
}

function preflightSection(p: Preflight): Markup {
  const cache = p.cache ? html`<dt>Cache</dt><dd>${p.cache.name} (${p.cache.heldImages} images held)</dd>` : html``;
  return html`<section><h2>Preflight</h2>
<p id="verdict" class="verdict ${verdictClass(p.verdict)}">${p.verdict}</p>
<p class="meta">Checked ${p.time} on ${p.backend}, ${p.totals.nodes} nodes, ${p.sets.length} sets.</p>
<h3>Reasons</h3>${list('reasons', p.reasons)}
<dl id="totals"><dt>Over the link</dt><dd>${formatBytes(p.totals.linkBytes)}</dd><dt>Fetched by nodes</dt><dd>${formatBytes(p.totals.fetchBytes)}</dd><dt>Written to nodes</dt><dd>${formatBytes(p.totals.writeBytes)}</dd>${cache}${eta(p.eta)}</dl>
<h3>Assumptions</h3>${list('assumptions', p.assumptions)}
</section>`;
}

/** How far a cell is: by bytes where both are known, else by images. */
function percent(cell: ReportCell): number {
  const share = cell.bytes && cell.pulledBytes !== undefined ? cell.pulledBytes / cell.bytes : cell.images ? cell.pulled / cell.images : cell.state === 'ready' ? 1 : 0;
  return Math.round(Math.min(1, Math.max(0, share)) * 100);
}

function matrixCell(node: string, set: string, cell: ReportCell | undefined): Markup {
  if (!cell) return html`<td class="untargeted" data-node="${node}" data-set="${set}" data-state="untargeted">—</td>`;
  const notes = [cell.waiting, cell.error].filter((n): n is string => !!n).map((n) => html`<span class="note">${n}</span>`);
  return html`<td class="${cell.state}" data-node="${node}" data-set="${set}" data-state="${cell.state}"><span class="state">${cell.state}</span> ${cell.pulled}/${cell.images} images<span class="note">${or(cell.pulledBytes)} of ${or(cell.bytes)}</span><div class="progress"><div style="width:${percent(cell)}%"></div></div>${notes}</td>`;
}

function preflightCells(node: PreflightNode | undefined): Markup {
  if (!node) return html`<td>—</td><td>—</td><td>—</td>`;
  return html`<td class="verdict-${verdictClass(node.verdict)}">${node.verdict}</td><td>${formatBytes(node.fetchBytes)}</td><td>${formatBytes(node.writeBytes)}</td>`;
}

function matrix(report: StagingReport): Markup {
  const cells = new Map(report.cells.map((c) => [JSON.stringify([c.node, c.set]), c]));
  const preflight = report.preflight;
  const byNode = new Map(preflight?.nodes.map((n) => [n.node, n]));
  const head = preflight ? html`<th scope="col">preflight</th><th scope="col">fetch</th><th scope="col">write</th>` : html``;
  const rows = report.nodes.map((node) => html`<tr><th scope="row" data-node="${node}">${node}</th>${report.sets.map((set) => matrixCell(node, set, cells.get(JSON.stringify([node, set]))))}${preflight ? preflightCells(byNode.get(node)) : html``}</tr>`);
  return html`<section><h2>Nodes and sets</h2><div class="scroll"><table id="matrix">
<thead><tr><th scope="col">node</th>${report.sets.map((set) => html`<th scope="col" data-set="${set}">${set}</th>`)}${head}</tr></thead>
<tbody>${rows}</tbody></table></div></section>`;
}

function linkSection(link: StagingReport['link']): Markup {
  const body = link && link.samples.length > 0 ? html`<div class="scroll">${linkChart(link)}</div>` : html`<p>No link samples in this report.</p>`;
  return html`<section><h2>Link use</h2>${body}</section>`;
}

function errorsSection(errors: StagingReport['errors']): Markup {
  const items = errors.length
    ? errors.map((e) => html`<li><strong>${e.node}</strong>, ${e.set}: <code>${e.error}</code></li>`)
    : html`<li>none</li>`;
  return html`<section><h2>Errors</h2><ul id="errors">${items}</ul></section>`;
}

export function renderReportHtml(report: StagingReport): string {
  return html`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>prestage staging report</title>
${STYLE}
</head>
<body>
<h1>prestage staging report</h1>
<p class="meta">Report time <time>${report.time}</time>, backend ${report.backend}.</p>
${report.preflight ? preflightSection(report.preflight) : html``}
${matrix(report)}
${linkSection(report.link)}
${errorsSection(report.errors)}
</body>
</html>
`.text;
}
