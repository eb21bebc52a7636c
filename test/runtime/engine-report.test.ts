/**
 * An engine's ENGINE_ERROR line (src/runtime/engine-report.ts): its code and message, read from the output around it;
 * a code that is not an endpoint error code reads as INFERENCE_ENGINE_UNKNOWN_ERROR; the message loses its control
 * characters (an engine may echo a model's own text, and PostgreSQL refuses a NUL in text: the failure would never be
 * recorded), and its line breaks stay.
 */
import { expect, test } from 'vitest';
import { reportedError } from '../../src/runtime/engine-report.js';

const line = (report: object) => `loading the model\nENGINE_ERROR ${JSON.stringify(report)}\n`;

test('the code and the message of the line', () => {
  expect(reportedError(line({ code: 'WORKLOAD_INIT_SETTINGS_ERROR', message: 'the context is too small' }))).toEqual({
    code: 'WORKLOAD_INIT_SETTINGS_ERROR',
    message: 'the context is too small',
  });
  expect(reportedError(line({ code: 'SOMETHING_ELSE' }))).toEqual({ code: 'INFERENCE_ENGINE_UNKNOWN_ERROR', message: undefined });
  expect(reportedError('no report here')).toBeUndefined();
  expect(reportedError('ENGINE_ERROR {not json}')).toBeUndefined();
});

test("the message's control characters go, its line breaks and tabs stay", () => {
  const message = 'template "chat\u0000ml" is not valid\u001b[31m\nat line\t3\u007f';
  expect(reportedError(line({ code: 'WORKLOAD_INIT_SETTINGS_ERROR', message }))?.message).toBe(
    'template "chatml" is not valid[31m\nat line\t3',
  );
});
