/**
 * The report's link use: an inline SVG bar chart of bytes per second over time against the cap,
 * and the same numbers as a table, for print and screen readers (a chart alone says nothing to
 * either). Inline SVG needs no namespace, image or script, so the report stays one file.
 */
import type { StagingReport } from '../api/preflight.js';
import { formatBytes, formatRate } from '../units.js';
import { html, type Markup } from './html.js';

type Link = NonNullable<StagingReport['link']>;

const WIDTH = 640;
const HEIGHT = 260;
const PLOT = { left: 84, right: 12, top: 16, bottom: 44 };

/** Coordinates with one decimal: enough for a chart, short in the file. */
const at = (v: number): string => v.toFixed(1);
const perSecond = (v: number): string => `${formatBytes(v)}/s`;

export function linkChart(link: Link): Markup {
  const { samples } = link;
  const cap = link.capBytesPerSecond;
  // Headroom above the highest bar or the cap, so the cap's line never sits on the frame.
  const top = Math.max(cap ?? 0, ...samples.map((s) => s.bytesPerSecond)) * 1.1 || 1;
  const plotWidth = WIDTH - PLOT.left - PLOT.right;
  const plotHeight = HEIGHT - PLOT.top - PLOT.bottom;
  const baseline = PLOT.top + plotHeight;
  const y = (v: number) => baseline - (Math.max(0, v) / top) * plotHeight;
  const slot = plotWidth / samples.length;
  const bars = samples.map((s, i) => {
    const h = baseline - y(s.bytesPerSecond);
    return html`<rect class="bar" x="${at(PLOT.left + i * slot + slot * 0.1)}" y="${at(baseline - h)}" width="${at(slot * 0.8)}" height="${at(h)}"><title>${s.time}: ${perSecond(s.bytesPerSecond)}</title></rect>`;
  });
  const ticks = [0, top / 2, top].map((v) => html`<text x="${at(PLOT.left - 6)}" y="${at(y(v) + 4)}" text-anchor="end">${perSecond(v)}</text>`);
  const first = samples[0]!;
  const last = samples[samples.length - 1]!;
  const capLine = cap === undefined
    ? html``
    : html`<line class="cap" x1="${at(PLOT.left)}" x2="${at(WIDTH - PLOT.right)}" y1="${at(y(cap))}" y2="${at(y(cap))}" stroke-dasharray="6 4"/><text x="${at(WIDTH - PLOT.right)}" y="${at(y(cap) - 4)}" text-anchor="end">cap ${perSecond(cap)}</text>`;
  return html`<svg id="link" role="img" aria-labelledby="link-title" viewBox="0 0 ${WIDTH} ${HEIGHT}" preserveAspectRatio="xMidYMid meet">
<title id="link-title">Link use in bytes per second over time${cap === undefined ? '' : `, cap ${perSecond(cap)}`}</title>
${bars}${capLine}
<line class="axis" x1="${at(PLOT.left)}" x2="${at(PLOT.left)}" y1="${at(PLOT.top)}" y2="${at(baseline)}"/><line class="axis" x1="${at(PLOT.left)}" x2="${at(WIDTH - PLOT.right)}" y1="${at(baseline)}" y2="${at(baseline)}"/>
${ticks}
<text x="${at(PLOT.left)}" y="${at(baseline + 16)}">${first.time}</text><text x="${at(WIDTH - PLOT.right)}" y="${at(baseline + 16)}" text-anchor="end">${last.time}</text>
<text x="${at(PLOT.left + plotWidth / 2)}" y="${at(HEIGHT - 6)}" text-anchor="middle">time</text><text x="12" y="${at(PLOT.top + plotHeight / 2)}" text-anchor="middle" transform="rotate(-90 12 ${at(PLOT.top + plotHeight / 2)})">bytes per second</text>
</svg>
<table class="link-table"><caption>Link use (${link.source})</caption>
<thead><tr><th scope="col">time</th><th scope="col">rate</th><th scope="col">of the cap</th></tr></thead>
<tbody>${samples.map((s) => html`<tr><td>${s.time}</td><td>${formatRate(s.bytesPerSecond)}</td><td>${cap ? `${Math.round((s.bytesPerSecond / cap) * 100)}%` : 'no cap'}</td></tr>`)}</tbody></table>`;
}
