/**
 * Label and field selectors of list and watch requests, parsed and matched as apimachinery does.
 *
 * Label selectors: `a=b`, `a==b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x)`, `a>1`, `a<1`, comma-separated (AND).
 * Field selectors: `f=v`, `f==v`, `f!=v` over the fields each resource supports; anything else is a 400 like the
 * real server's.
 */
import { badRequest, pathValue, type KubeObject } from './objects.js';
import { labelValueError, qualifiedNameError } from './validation.js';

type Operator = 'eq' | 'neq' | 'exists' | 'notexists' | 'in' | 'notin' | 'gt' | 'lt';
export interface Requirement {
  key: string;
  op: Operator;
  values: string[];
}

export type Selector = (object: KubeObject) => boolean;

/** Splits on commas outside parentheses. */
function splitTerms(text: string): string[] {
  const terms: string[] = [];
  let depth = 0;
  let current = '';
  for (const ch of text) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      terms.push(current);
      current = '';
    } else current += ch;
  }
  terms.push(current);
  return terms.map((t) => t.trim());
}

function checkKey(key: string): void {
  const error = qualifiedNameError(key);
  if (error) throw badRequest(`unable to parse requirement: key: Invalid value: "${key}": ${error}`);
}

function checkValue(value: string): void {
  const error = labelValueError(value);
  if (error) throw badRequest(`unable to parse requirement: values[0][${value}]: Invalid value: "${value}": ${error}`);
}

export function parseLabelSelector(text: string): Requirement[] {
  if (text.trim() === '') return [];
  return splitTerms(text).map((term): Requirement => {
    let match = /^([^\s!=<>(),]+)\s+(in|notin)\s*\(([^)]*)\)$/.exec(term);
    if (match) {
      const values = match[3]!.split(',').map((v) => v.trim());
      checkKey(match[1]!);
      values.forEach(checkValue);
      if (match[2] === 'in' && values.length === 1 && values[0] === '')
        throw badRequest(`unable to parse requirement: for 'in', 'notin' operators, values set can't be empty`);
      return { key: match[1]!, op: match[2] as Operator, values };
    }
    match = /^([^\s!=<>(),]+)\s*(==|=|!=|>|<)\s*([^\s!=<>(),]*)$/.exec(term);
    if (match) {
      const op = ({ '=': 'eq', '==': 'eq', '!=': 'neq', '>': 'gt', '<': 'lt' } as const)[match[2] as '=' | '==' | '!=' | '>' | '<'];
      checkKey(match[1]!);
      checkValue(match[3]!);
      if ((op === 'gt' || op === 'lt') && !/^-?\d+$/.test(match[3]!))
        throw badRequest(`unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer`);
      return { key: match[1]!, op, values: [match[3]!] };
    }
    match = /^(!?)\s*([^\s!=<>(),]+)$/.exec(term);
    if (match) {
      checkKey(match[2]!);
      return { key: match[2]!, op: match[1] ? 'notexists' : 'exists', values: [] };
    }
    throw badRequest(`unable to parse requirement: found '${term}', expected: in, notin, =, ==, !=, gt, lt`);
  });
}

export function matchesRequirement(labels: Record<string, string> | undefined, r: Requirement): boolean {
  const has = labels != null && Object.prototype.hasOwnProperty.call(labels, r.key);
  const value = has ? labels![r.key]! : undefined;
  switch (r.op) {
    case 'eq':
    case 'in':
      return has && r.values.includes(value!);
    case 'neq':
    case 'notin':
      return !has || !r.values.includes(value!);
    case 'exists':
      return has;
    case 'notexists':
      return !has;
    case 'gt':
    case 'lt': {
      if (!has || !/^-?\d+$/.test(value!)) return false;
      return r.op === 'gt' ? Number(value) > Number(r.values[0]) : Number(value) < Number(r.values[0]);
    }
  }
}

export function labelSelector(text: string | null): Selector {
  const requirements = parseLabelSelector(text ?? '');
  if (requirements.length === 0) return () => true;
  return (object) => requirements.every((r) => matchesRequirement(object.metadata.labels, r));
}

/** The fields each resource's field selectors may name (metadata.name and metadata.namespace are always allowed). */
const FIELDS: Record<string, string[]> = {
  pods: [
    'spec.nodeName',
    'spec.restartPolicy',
    'spec.schedulerName',
    'spec.serviceAccountName',
    'spec.hostNetwork',
    'status.phase',
    'status.podIP',
    'status.nominatedNodeName',
  ],
  nodes: ['spec.unschedulable'],
  secrets: ['type'],
  configmaps: [],
  namespaces: ['status.phase'],
  events: [
    'involvedObject.kind',
    'involvedObject.namespace',
    'involvedObject.name',
    'involvedObject.uid',
    'involvedObject.apiVersion',
    'involvedObject.resourceVersion',
    'involvedObject.fieldPath',
    'reason',
    'reportingComponent',
    'source',
    'type',
  ],
};

function fieldValue(object: KubeObject, field: string): string {
  if (field === 'source') return object.source?.component ?? object.reportingComponent ?? '';
  const value = pathValue(object, field);
  return value == null ? '' : String(value);
}

export function fieldSelector(resource: string, text: string | null): Selector {
  if (!text || text.trim() === '') return () => true;
  const allowed = ['metadata.name', 'metadata.namespace', ...(FIELDS[resource] ?? [])];
  const terms = splitTerms(text).map((term) => {
    const match = /^([^=!]+?)\s*(==|=|!=)\s*(.*)$/.exec(term);
    if (!match) throw badRequest(`invalid selector: '${text}'; can't understand '${term}'`);
    const field = match[1]!.trim();
    if (!allowed.includes(field)) throw badRequest(`field label not supported: ${field}`);
    return { field, negate: match[2] === '!=', value: match[3]!.trim() };
  });
  return (object) => terms.every((t) => (fieldValue(object, t.field) === t.value) !== t.negate);
}
