/**
 * An answer's tokens with their probabilities (`logprobs`): the text shaded token by token (the
 * less likely, the darker), each token's probability and likeliest alternatives in its tooltip,
 * and the same in a table for keyboards and screen readers.
 */
import type { CSSProperties } from 'react';
import type { TokenProbability } from './chat-model.js';

function percent(logprob: number): string {
  const p = Math.exp(logprob) * 100;
  return `${p >= 10 ? p.toFixed(0) : p >= 0.1 ? p.toFixed(1) : p.toExponential(0)}%`;
}

/** A token as a reader can see it: quoted, with whitespace and control characters escaped. */
const shown = (token: string) => JSON.stringify(token);

const alternatives = (t: TokenProbability) => t.topLogprobs.map((a) => `${shown(a.token)} ${percent(a.logprob)}`).join(', ');

/** The answer text, one span per token, shaded by how unlikely it was. */
export function TokenText({ tokens }: { tokens: TokenProbability[] }) {
  return (
    <>
      {tokens.map((t, i) => (
        <span
          key={i}
          className="token"
          style={{ '--unlikely': (1 - Math.exp(t.logprob)).toFixed(3) } as CSSProperties}
          title={`${percent(t.logprob)}${t.topLogprobs.length > 0 ? ` · likeliest: ${alternatives(t)}` : ''}`}
        >
          {t.token}
        </span>
      ))}
    </>
  );
}

/** Every token of the answer, its probability and the likeliest alternatives, folded away. */
export function TokenTable({ tokens }: { tokens: TokenProbability[] }) {
  return (
    <details className="token-table">
      <summary>Token probabilities ({tokens.length} tokens)</summary>
      <div className="table-scroll">
        <table>
          <thead>
            <tr>
              <th scope="col">#</th>
              <th scope="col">Token</th>
              <th scope="col">Probability</th>
              <th scope="col">Likeliest alternatives</th>
            </tr>
          </thead>
          <tbody>
            {tokens.map((t, i) => (
              <tr key={i}>
                <td>{i + 1}</td>
                <td>
                  <code>{shown(t.token)}</code>
                </td>
                <td>{percent(t.logprob)}</td>
                <td>{alternatives(t)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </details>
  );
}
