/** A labelled <progress> for a model download: bytes done of the total. */
import { useId } from 'react';
import { formatBytes } from './format.js';

export function DownloadProgressBar({ label, progress }: { label: string; progress: { bytesDone: number; bytesTotal: number } }) {
  const id = useId();
  const { bytesDone, bytesTotal } = progress;
  const text = bytesTotal > 0 ? `${formatBytes(bytesDone)} / ${formatBytes(bytesTotal)}` : formatBytes(bytesDone);
  return (
    <div className="download-progress">
      <label htmlFor={id}>
        {label}: {text}
      </label>
      <progress id={id} max={bytesTotal > 0 ? bytesTotal : undefined} value={bytesTotal > 0 ? bytesDone : undefined}>
        {text}
      </progress>
    </div>
  );
}
