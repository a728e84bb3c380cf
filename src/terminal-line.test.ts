import { Writable } from 'node:stream';
import { expect, it } from 'vitest';
import { fitLine, isLiveTerminal } from './terminal-line.js';

it('cuts a line to one less than the width, marking the cut', () => {
  expect(fitLine('12345', 10)).toBe('12345');
  expect(fitLine('123456789', 10)).toBe('123456789');
  expect(fitLine('1234567890', 10)).toBe('12345678…');
  expect(fitLine('1234567890', undefined)).toBe('1234567890');
  expect([...fitLine('é'.repeat(50), 20)]).toHaveLength(19);
});

it('redraws only on a terminal that is not TERM=dumb', () => {
  const tty = Object.assign(new Writable(), { isTTY: true });
  expect(isLiveTerminal(tty, 'xterm-256color')).toBe(true);
  expect(isLiveTerminal(tty, 'dumb')).toBe(false);
  expect(isLiveTerminal(new Writable(), 'xterm-256color')).toBe(false);
});
