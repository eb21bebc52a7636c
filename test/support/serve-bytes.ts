/**
 * How the stand-ins (hub, registry) serve file bytes: single-range requests
 * (206 and 416 as storage services answer them), HEAD, and the transfer
 * faults the model-source tests provoke.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';

export type TransferFault = { type: 'truncate'; afterBytes: number } | { type: 'slow'; chunkBytes: number; delayMs: number };

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
    // Send the first bytes, give the client time to consume them (a web stream that errors drops what it has
    // queued but not yet read), then drop the connection mid-body.
    res.write(body.subarray(0, fault.afterBytes));
    await sleep(50);
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
