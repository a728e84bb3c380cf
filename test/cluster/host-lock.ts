/**
 * One kubelet bed (and kube-proxy) on the host at a time, across vitest's worker processes: the
 * first kubelet writes the host's firewall chains and its bed removes them, and kube-proxy owns
 * the host's nat rules and flushes them at its stop. Other test beds (API server, etcd, CRI-O on
 * free ports, in their own dirs) run beside it. A file in the temp dir holds the owner's pid; a
 * lock whose process is gone is taken over. Re-entrant within one process.
 */
import { open, readFile, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const LOCK = join(tmpdir(), 'prestage-testbed-host.lock');
let holders = 0;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Resolves once this process holds the host; call the returned release when done. */
export async function holdHost(): Promise<() => Promise<void>> {
  if (holders === 0) {
    for (;;) {
      try {
        const file = await open(LOCK, 'wx');
        await file.writeFile(String(process.pid));
        await file.close();
        break;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        const owner = Number(await readFile(LOCK, 'utf8').catch(() => ''));
        // Its owner died (or had not written its pid yet: look again).
        if (owner > 0 && !alive(owner)) await unlink(LOCK).catch(() => undefined);
        else await sleep(250);
      }
    }
  }
  holders++;
  let released = false;
  return async () => {
    if (released) return;
    released = true;
    if (--holders === 0) await unlink(LOCK).catch(() => undefined);
  };
}
