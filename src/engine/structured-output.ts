/**
 * The grammars that keep an answer valid JSON (`response_format`, see
 * ../domain/response-format.ts): node-llama-cpp's JSON grammar for
 * `json_object`, and one generated from the schema for `json_schema`. A
 * grammar is built once per schema and reused (an application sends the same
 * few schemas again and again); the last GRAMMARS_KEPT are kept.
 */
import { LRUCache } from 'lru-cache';
import type { Llama, LlamaGrammar } from 'node-llama-cpp';
import { invalidRequest, type EngineError } from './openai-errors.js';
import type { JsonSchema } from '../domain/json-schema-subset.js';
import type { ResponseFormat } from '../domain/response-format.js';

const GRAMMARS_KEPT = 64;
/**
 * node-llama-cpp ends a schema's grammar with four newlines or more, which its own chat session
 * takes as a stop trigger; here they would make the model pad every answer (and an answer cut
 * among them report `length`). Without them, the grammar ends with the value, and only an
 * end-of-sequence token can follow it.
 */
const NEWLINE_PADDING = ' "\\n\\n\\n\\n" [\\n]*';

/** The grammar of a checked schema, ending with the value. */
async function schemaGrammar(llama: Llama, schema: JsonSchema): Promise<LlamaGrammar> {
  const generated = await llama.createGrammarForJsonSchema(schema as never);
  const text = generated.grammar;
  const at = text.indexOf(NEWLINE_PADDING);
  // Another node-llama-cpp version may generate it differently: its own grammar still enforces the schema.
  if (at < 0 || !text.slice(0, at).startsWith('root ::=') || text.slice(0, at).includes('\n')) return generated;
  return llama.createGrammar({ grammar: text.slice(0, at) + text.slice(at + NEWLINE_PADDING.length) });
}

const RESPONSE_FORMAT_REFUSED = invalidRequest(
  'response_format.json_schema.schema cannot be enforced: llama.cpp refused the grammar made from it (too many repetitions: lower its lengths and item counts)',
  'response_format.json_schema.schema',
);

export class Grammars {
  private readonly cache = new LRUCache<string, Promise<LlamaGrammar>>({ max: GRAMMARS_KEPT });

  constructor(
    private readonly llama: Llama,
    private readonly log: (line: string) => void = () => {},
  ) {}

  /**
   * The grammar a JSON format needs, or `refused` (by default the 400 of a response_format schema)
   * when llama.cpp cannot take the schema's grammar.
   */
  async forFormat(
    format: Exclude<ResponseFormat, { type: 'text' }>,
    refused: EngineError = RESPONSE_FORMAT_REFUSED,
  ): Promise<LlamaGrammar | EngineError> {
    const key = format.type === 'json_object' ? 'json_object' : JSON.stringify(format.schema);
    let grammar = this.cache.get(key);
    if (grammar === undefined) {
      grammar =
        format.type === 'json_object'
          ? this.llama.getGrammarFor('json')
          : // The schema was checked against the subset the generator enforces (json-schema-subset.ts).
            schemaGrammar(this.llama, format.schema);
      this.cache.set(key, grammar);
      grammar.catch(() => this.cache.delete(key));
    }
    try {
      return await grammar;
    } catch (error) {
      // llama.cpp refuses a grammar whose repetitions (lengths, item counts) add up past its own bound. Its message
      // may quote the grammar, made from the request's schema: the log names the parameter only (no request content).
      this.log(`[engine] a grammar was refused (${refused.param}): ${error instanceof Error ? error.name : 'error'}`);
      return refused;
    }
  }
}
