/**
 * The grammars that keep an answer valid JSON (`response_format`, see
 * ../domain/response-format.ts): node-llama-cpp's JSON grammar for
 * `json_object`, and one generated from the schema for `json_schema`. A
 * grammar is built once per schema and reused (an application sends the same
 * few schemas again and again); the last GRAMMARS_KEPT are kept.
 */
import { LRUCache } from 'lru-cache';
import type { Llama, LlamaGrammar } from 'node-llama-cpp';
import { invalidRequest, type RequestError } from '../domain/chat-request.js';
import type { ResponseFormat } from '../domain/response-format.js';

const GRAMMARS_KEPT = 64;

export class Grammars {
  private readonly cache = new LRUCache<string, Promise<LlamaGrammar>>({ max: GRAMMARS_KEPT });

  constructor(private readonly llama: Llama) {}

  /** The grammar a format needs (none for text), or the 400 of a schema the generator cannot take. */
  async forFormat(format: ResponseFormat): Promise<LlamaGrammar | undefined | RequestError> {
    if (format.type === 'text') return undefined;
    const key = format.type === 'json_object' ? 'json_object' : JSON.stringify(format.schema);
    let grammar = this.cache.get(key);
    if (grammar === undefined) {
      grammar =
        format.type === 'json_object'
          ? this.llama.getGrammarFor('json')
          : // The schema was checked against the subset the generator enforces (response-format.ts).
            this.llama.createGrammarForJsonSchema(format.schema as never);
      this.cache.set(key, grammar);
      grammar.catch(() => this.cache.delete(key));
    }
    try {
      return await grammar;
    } catch (error) {
      // llama.cpp refuses a grammar whose repetitions (lengths, item counts) add up past its own bound.
      const reason = error instanceof Error ? error.message : String(error);
      return invalidRequest(
        `response_format.json_schema.schema cannot be enforced: llama.cpp refused its grammar (${reason}); lower its minLength, maxLength, minItems or maxItems`,
        'response_format.json_schema.schema',
      );
    }
  }
}
