/** A held lock's heartbeat (src/util/file-lock.ts): its text written again, in place. */
import { open } from 'node:fs/promises';

/**
 * Writes the lock's text again, in place: the filesystem stamps the write (a holder's clock may be off), and it goes
 * to the file this process opened and found its own, never to a lock put in its place meanwhile. 'lost': the lock is
 * gone or another's; 'failed': it could not be written (a close that fails counts: NFS reports write errors there).
 */
export async function refresh(path: string, text: string): Promise<'refreshed' | 'failed' | 'lost'> {
  let handle;
  try {
    handle = await open(path, 'r+');
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'lost' : 'failed';
  }
  try {
    if ((await handle.readFile('utf8')) !== text) return 'lost';
    await handle.write(text, 0, 'utf8');
    const written = handle;
    handle = undefined;
    await written.close();
    return 'refreshed';
  } catch {
    return 'failed';
  } finally {
    await handle?.close().catch(() => {});
  }
}
