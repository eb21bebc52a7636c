/**
 * `chat_template_kwargs`, the variables a chat request gives the model's chat template, and
 * `reasoning_effort`, which reaches the template through them: the engine has a think switch
 * (`enable_thinking`, which Qwen3-style templates read), not effort levels.
 */
import { isObject } from './field-checker.js';
import { describe, fail } from './request-checks.js';

/** `chat_template_kwargs`: how many members, how long a name and a string value, how many items in a list. */
export const TEMPLATE_KWARGS_LIMITS = { members: 16, nameLength: 64, stringLength: 1000, listItems: 16 } as const;
const KWARG_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Variables the engine gives the template itself (node-llama-cpp's JinjaTemplateChatWrapper), or features it refuses. */
const ENGINE_VARIABLES: ReadonlySet<string> = new Set([
  'messages',
  'add_generation_prompt',
  'bos_token',
  'eos_token',
  'eot_token',
  'tools',
]);
/**
 * Names the template language declares before the request's variables. @huggingface/jinja, which
 * renders templates for node-llama-cpp, declares its literals (in both cases) and its globals, and
 * refuses to declare one again ("Variable already declared: namespace"); Python's Jinja2 (an
 * engine of your own, such as vLLM) lets a variable replace a global that templates call
 * (`namespace`, `range`), and sets `loop` and `self` itself.
 */
const TEMPLATE_LANGUAGE_NAMES: ReadonlySet<string> = new Set([
  'true',
  'false',
  'none',
  'True',
  'False',
  'None',
  'namespace',
  'range',
  'raise_exception',
  'strftime_now',
  'dict',
  'cycler',
  'joiner',
  'lipsum',
  'loop',
  'self',
]);

function isTemplateScalar(value: unknown): boolean {
  if (value === null || typeof value === 'boolean') return true;
  if (typeof value === 'number') return Number.isFinite(value);
  return typeof value === 'string' && value.length <= TEMPLATE_KWARGS_LIMITS.stringLength;
}

/**
 * `chat_template_kwargs`: variables for the chat template, so template-sized:
 * at most 16, named like template variables, none that the engine or the
 * template language sets itself, each a JSON scalar (a string of at most 1000
 * characters) or a short list of them. `enable_thinking`, the documented one,
 * is a boolean.
 */
export function parseTemplateKwargs(kwargs: unknown): Record<string, unknown> {
  if (kwargs === undefined || kwargs === null) return {};
  const param = 'chat_template_kwargs';
  if (!isObject(kwargs)) fail(`${param} must be an object (got ${describe(kwargs)})`, param, 'invalid_type');
  const names = Object.keys(kwargs);
  if (names.length > TEMPLATE_KWARGS_LIMITS.members)
    fail(`${param} may have at most ${TEMPLATE_KWARGS_LIMITS.members} members (got ${names.length})`, param);
  for (const name of names) {
    const at = `${param}.${name}`;
    if (!KWARG_NAME.test(name) || name.length > TEMPLATE_KWARGS_LIMITS.nameLength) {
      fail(
        `${param} member names must be template variable names (letters, digits and '_', not starting with a digit, at most ${TEMPLATE_KWARGS_LIMITS.nameLength}; got ${JSON.stringify(name.slice(0, 80))})`,
        param,
      );
    }
    if (ENGINE_VARIABLES.has(name)) fail(`${at} cannot be set: the engine passes ${name} to the chat template itself`, at);
    if (TEMPLATE_LANGUAGE_NAMES.has(name))
      fail(`${at} cannot be set: ${name} is a literal or a built-in of the chat template language (Jinja), which templates rely on`, at);
    const value = kwargs[name];
    const ok =
      isTemplateScalar(value) ||
      (Array.isArray(value) && value.length <= TEMPLATE_KWARGS_LIMITS.listItems && value.every(isTemplateScalar));
    if (!ok) {
      fail(
        `${at} must be a boolean, a number, a string of at most ${TEMPLATE_KWARGS_LIMITS.stringLength} characters, null, or a list of at most ${TEMPLATE_KWARGS_LIMITS.listItems} of those (got ${describe(value).slice(0, 80)})`,
        at,
        'invalid_type',
      );
    }
  }
  if (kwargs.enable_thinking !== undefined && kwargs.enable_thinking !== null && typeof kwargs.enable_thinking !== 'boolean') {
    fail(
      `${param}.enable_thinking must be a boolean (got ${describe(kwargs.enable_thinking)})`,
      `${param}.enable_thinking`,
      'invalid_type',
    );
  }
  const out = { ...kwargs };
  // null means "not set" in JSON clients; to Jinja it would be a defined value.
  if (kwargs.enable_thinking === null) delete out.enable_thinking;
  return out;
}

/** OpenAI's `reasoning_effort` values. */
export const REASONING_EFFORTS = ['none', 'minimal', 'low', 'medium', 'high'] as const;
/** Efforts that reach the template by name too, for templates that read a level (gpt-oss's reads `reasoning_effort`). */
const LEVELS: ReadonlySet<string> = new Set(['low', 'medium', 'high']);

/**
 * `reasoning_effort`, as the template variables it means: `none` and `minimal` turn thinking off
 * (`enable_thinking: false`: the fewest reasoning tokens this engine can give is none); `low`,
 * `medium` and `high` turn it on and are passed on as `reasoning_effort`. The kwargs go to the
 * replica as they are here, so the engine, which reads the request again, sees the same.
 * A value the kwargs already set otherwise is a 400, not a silent winner.
 */
export function withReasoningEffort(kwargs: Record<string, unknown>, effort: unknown): Record<string, unknown> {
  if (effort === undefined || effort === null) return kwargs;
  const param = 'reasoning_effort';
  if (typeof effort !== 'string') fail(`${param} must be a string (got ${describe(effort)})`, param, 'invalid_type');
  if (!(REASONING_EFFORTS as readonly string[]).includes(effort))
    fail(`${param} must be one of ${REASONING_EFFORTS.map((e) => `"${e}"`).join(', ')} (got ${describe(effort)})`, param);
  const implied: Record<string, unknown> = { enable_thinking: LEVELS.has(effort) };
  if (LEVELS.has(effort)) implied.reasoning_effort = effort;
  for (const [name, value] of Object.entries(implied)) {
    if (kwargs[name] !== undefined && kwargs[name] !== value) {
      fail(
        `${param} "${effort}" means chat_template_kwargs.${name}: ${JSON.stringify(value)}, but chat_template_kwargs sets ${name} to ${describe(kwargs[name])}: send one of them`,
        param,
      );
    }
  }
  const out = { ...kwargs, ...implied };
  if (Object.keys(out).length > TEMPLATE_KWARGS_LIMITS.members) {
    fail(
      `${param} sets chat_template_kwargs.${Object.keys(implied).join(' and .')}, which makes more than ${TEMPLATE_KWARGS_LIMITS.members} members there: send fewer chat_template_kwargs`,
      param,
    );
  }
  return out;
}
