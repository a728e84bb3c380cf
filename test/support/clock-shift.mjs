// Test-only, loaded into a prestage process with NODE_OPTIONS=--import=<this file>: its wall
// clock (Date) runs ahead or behind by the milliseconds written in $PRESTAGE_TEST_CLOCK_FILE,
// read again every 100 ms, so a test moves the agents' clock to a staging window's edge
// without hours of waiting. Timers and the monotonic clock are untouched.
import { readFileSync } from 'node:fs';

const file = process.env.PRESTAGE_TEST_CLOCK_FILE;
if (file) {
  let offset = 0;
  const read = () => {
    try {
      offset = Number(readFileSync(file, 'utf8')) || 0;
    } catch {
      // Not written yet: the real clock.
    }
  };
  read();
  setInterval(read, 100).unref();
  const RealDate = Date;
  const realNow = RealDate.now;
  class ShiftedDate extends RealDate {
    constructor(...args) {
      if (args.length === 0) super(realNow() + offset);
      else super(...args);
    }
    static now() {
      return realNow() + offset;
    }
  }
  globalThis.Date = ShiftedDate;
}
