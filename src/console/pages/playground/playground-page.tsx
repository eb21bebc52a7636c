/** Chat playground. (Being written.) */
export function PlaygroundPage({ id }: { id?: string | undefined }) {
  return <h1>Playground {id}</h1>;
}
