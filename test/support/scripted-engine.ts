/**
 * Pieces of the small OpenAI-compatible servers tests run as engines through ENGINE_COMMAND (each test writes its
 * own script around them, for what it needs the engine to do): JavaScript source, to be put in the script's text.
 */

/** `chunk(content)`: one chat.completion.chunk's JSON. */
export const CHUNK_JS = `const chunk = (content) => JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content }, finish_reason: null }] });`;

/** `answerWhole(res, status)`: a whole chat.completion (status 200), or an error body with `status`. */
export const ANSWER_WHOLE_JS = `const answerWhole = (res, status = 200) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(status === 200 ? { id: 'c', object: 'chat.completion', created: 1, model: 'm',
    choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } } : { error: { message: 'no' } }));
};`;
