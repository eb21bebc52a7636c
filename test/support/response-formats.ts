/**
 * A `response_format` the tests share: a schema whose answers always end (an enum and a boolean), so
 * that even the tiny random model finishes its JSON well within max_tokens.
 */
export const VERDICT_FORMAT = {
  type: 'json_schema' as const,
  json_schema: {
    name: 'verdict',
    strict: true,
    schema: {
      type: 'object',
      properties: { answer: { type: 'string', enum: ['yes', 'no'] }, sure: { type: 'boolean' } },
      required: ['answer', 'sure'],
      additionalProperties: false,
    },
  },
};
