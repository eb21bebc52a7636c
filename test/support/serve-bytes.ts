/**
 * How the stand-ins (hub, registry) serve file bytes: single-range requests
 * (206 and 416 as storage services answer them), HEAD, and the transfer
 * faults the model-source tests provoke.
 */
import { stat } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * `truncate` sends the first `afterBytes` of the answer, then drops the connection. The client loses what it had
 * received but not yet read (a web stream that errors drops its queue), so a test that counts the bytes each attempt
 * kept names the client's partial file (`heldUntilFile`): the cut waits until the file holds them (5 s at most);
 * otherwise it waits 50 ms, which a loaded machine's client can outlast.
 */
export type TransferFault =
  { type: 'truncate'; afterBytes: number; heldUntilFile?: string } | { type: 'slow'; chunkBytes: number; delayMs: number };

const HOLD_LIMIT_MS = 5_000;

/** Resolves once `file` has at least `size` bytes, or after HOLD_LIMIT_MS. */
async function fileReaches(file: string, size: number): Promise<void> {
  const deadline = Date.now() + HOLD_LIMIT_MS;
  while (Date.now() < deadline) {
    const bytes = await stat(file).then(
      (s) => s.size,
      () => 0,
    );
    if (bytes >= size) return;
    await sleep(5);
  }
}

export async function serveBytes(
  req: IncomingMessage,
  res: ServerResponse,
  content: Buffer,
  options: { headers?: Record<string, string>; contentType?: string; fault?: TransferFault | { type: string } | null } = {},
): Promise<void> {
  const size = content.length;
  let [start, end, status] = [0, size - 1, 200];
  let headers = options.headers ?? {};
  const range = req.headers.range?.match(/^bytes=(\d*)-(\d*)$/);
  if (range && (range[1] || range[2])) {
    start = range[1] ? Number(range[1]) : Math.max(0, size - Number(range[2]));
    end = range[1] && range[2] ? Math.min(Number(range[2]), size - 1) : size - 1;
    if (start >= size || start > end) {
      res.writeHead(416, { ...headers, 'Content-Range': `bytes */${size}` }).end();
      return;
    }
    status = 206;
    headers = { ...headers, 'Content-Range': `bytes ${start}-${end}/${size}` };
  }
  const body = content.subarray(start, end + 1);
  res.writeHead(status, {
    ...headers,
    'Content-Type': options.contentType ?? 'application/octet-stream',
    'Content-Length': body.length,
    'Accept-Ranges': 'bytes',
  });
  if (req.method === 'HEAD') return void res.end();
  const fault = options.fault as TransferFault | null | undefined;
  if (fault?.type === 'truncate') {
    // Send the first bytes, give the client time to consume them (see TransferFault), then drop the connection mid-body.
    res.write(body.subarray(0, fault.afterBytes));
    await (fault.heldUntilFile ? fileReaches(fault.heldUntilFile, start + Math.min(fault.afterBytes, body.length)) : sleep(50));
    return void res.socket?.destroy();
  }
  if (fault?.type === 'slow') {
    for (let i = 0; i < body.length && !res.destroyed; i += fault.chunkBytes) {
      res.write(body.subarray(i, i + fault.chunkBytes));
      await sleep(fault.delayMs);
    }
    return void res.end();
  }
  res.end(body);
}
