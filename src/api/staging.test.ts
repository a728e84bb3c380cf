import { describe, expect, it } from 'vitest';
import { checkTimeZone, gateOf, localMinute, parseWindow, scheduleAnnotations, scheduleOf, windowGate, PAUSED_ANNOTATION } from './staging.js';

const at = (iso: string) => Date.parse(iso);

describe('staging windows', () => {
  it('parses HH:MM-HH:MM and refuses the rest with one line', () => {
    expect(parseWindow('22:00-06:00')).toEqual({ start: 1320, end: 360, text: '22:00-06:00' });
    expect(parseWindow('9:30-17:00').text).toBe('09:30-17:00');
    for (const bad of ['22-06', '25:00-06:00', '22:00', '22:00-06:00-07:00', 'tonight']) expect(() => parseWindow(bad)).toThrow(/--window: bad window .*HH:MM-HH:MM/);
    expect(() => parseWindow('22:00-22:00')).toThrow(/zero length/);
  });

  it('knows IANA zones and refuses others', () => {
    expect(checkTimeZone('Europe/Paris')).toBe('Europe/Paris');
    expect(() => checkTimeZone('Mars/Olympus')).toThrow(/--window-tz: unknown time zone "Mars\/Olympus"/);
  });

  it('is open inside a window that wraps midnight and says when it closes', () => {
    const schedule = { windows: [parseWindow('22:00-06:00')], timeZone: 'UTC', strict: false };
    const gate = windowGate(schedule, at('2026-11-26T23:30:20Z'));
    expect(gate).toEqual({ open: true, closesAt: at('2026-11-27T06:00:00Z'), strict: false });
    expect(windowGate(schedule, at('2026-11-27T05:59:59Z')).open).toBe(true);
  });

  it('is shut outside, with the next opening and a note in the window\'s own time zone', () => {
    const schedule = { windows: [parseWindow('22:00-06:00'), parseWindow('12:00-13:00')], timeZone: 'Europe/Paris', strict: true };
    // 10:15 UTC is 11:15 in Paris (CET): the next opening is 12:00 Paris, 11:00 UTC.
    const gate = windowGate(schedule, at('2026-11-26T10:15:42Z'));
    expect(gate).toEqual({ open: false, why: 'window', opensAt: at('2026-11-26T11:00:00Z'), note: 'paused until 12:00 Europe/Paris (staging windows 22:00-06:00, 12:00-13:00)' });
    expect(windowGate(schedule, at('2026-11-26T06:00:00Z')).open).toBe(false);
    expect(localMinute(at('2026-07-01T10:00:00Z'), 'Europe/Paris')).toBe(12 * 60);
  });

  it('round-trips through annotations; a pause wins over any window', () => {
    const annotations = scheduleAnnotations({ windows: [parseWindow('22:00-06:00')], timeZone: 'UTC', strict: true });
    expect(scheduleOf(annotations)).toEqual({ windows: [parseWindow('22:00-06:00')], timeZone: 'UTC', strict: true });
    expect(gateOf(annotations, at('2026-11-26T23:00:00Z')).open).toBe(true);
    expect(gateOf({ ...annotations, [PAUSED_ANNOTATION]: '2026-11-26T22:30:00Z' }, at('2026-11-26T23:00:00Z'))).toMatchObject({ open: false, why: 'paused' });
    expect(gateOf(undefined, 0)).toEqual({ open: true });
    expect(() => scheduleOf({ 'prestage.dev/staging-windows': '22:00' })).toThrow(/annotation prestage.dev\/staging-windows: bad window/);
  });
});
