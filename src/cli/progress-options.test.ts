import { Writable } from 'node:stream';
import { expect, it } from 'vitest';
import { progressModeFrom } from './progress-options.js';

const tty = Object.assign(new Writable(), { isTTY: true });
const pipe = new Writable();

it('draws a live line on a terminal and only the summary elsewhere, unless asked', () => {
  expect(progressModeFrom({}, tty, 'xterm')).toBe('live');
  expect(progressModeFrom({}, pipe, 'xterm')).toBe('none');
  expect(progressModeFrom({}, tty, 'dumb')).toBe('none');
  expect(progressModeFrom({ progress: true }, pipe, 'xterm')).toBe('lines');
  expect(progressModeFrom({ progress: true }, tty, 'dumb')).toBe('lines');
  expect(progressModeFrom({ progress: true }, tty, 'xterm')).toBe('live');
});

it('--quiet and --no-progress write no progress anywhere', () => {
  expect(progressModeFrom({ quiet: true }, tty, 'xterm')).toBe('none');
  expect(progressModeFrom({ quiet: true, progress: true }, pipe, 'xterm')).toBe('none');
  expect(progressModeFrom({ progress: false }, tty, 'xterm')).toBe('none');
});
