/**
 * Checks on the model file before llama.cpp loads it.
 *
 * A truncated GGUF (an interrupted download, a full disk) has intact metadata but tensor data that
 * ends early; llama.cpp then fails with a bare "Failed to load model". Catching it here gives a
 * precise error, and also avoids a node-llama-cpp 3.21 defect: a model whose native load failed
 * keeps a dispose guard on the Llama instance that is only released while the half-built model
 * object is still reachable, so a later `llama.dispose()` can wait forever after a GC.
 */
import { stat } from 'node:fs/promises';
import { GgufInsights, readGgufFileInfo, type Llama } from 'node-llama-cpp';
import { EngineStartError } from './errors.js';

export async function assertCompleteGguf(llama: Llama, modelPath: string): Promise<void> {
  const info = await readGgufFileInfo(modelPath, { sourceType: 'filesystem' });
  // Split models (model-00001-of-0000N.gguf) spread their tensors over several files.
  if (info.splicedParts !== 1 || info.infoEndOffset == null) return;
  const insights = await GgufInsights.from(info, llama);
  const needed = info.infoEndOffset + insights.modelSize;
  const { size } = await stat(modelPath);
  if (size < needed) {
    throw new EngineStartError(
      'INFERENCE_ENGINE_INVALID_ARGUMENT_ERROR',
      `The model file is corrupted or incomplete (${size} bytes, its header describes at least ${needed}).`,
    );
  }
}
