/** Internal type. DO NOT USE DIRECTLY. */
type Exact<T extends { [key: string]: unknown }> = { [K in keyof T]: T[K] };
/** Internal type. DO NOT USE DIRECTLY. */
export type Incremental<T> = T | { [P in keyof T]?: P extends ' $fragmentName' | '__typename' ? T[P] : never };
import type { TypedDocumentNode as DocumentNode } from '@graphql-typed-document-node/core';
export type ArtifactState = 'COMMITTED' | 'DELETED' | 'PENDING';

export type ArtifactMembershipByNameQueryVariables = Exact<{
  entity: string;
  project: string;
  name: string;
}>;

export type ArtifactMembershipByNameQuery = {
  project: {
    artifactCollectionMembership: {
      __typename: 'ArtifactCollectionMembership';
      id: string;
      versionIndex: number | null;
      aliases: Array<{ __typename: 'ArtifactAlias'; id: string; alias: string }>;
      artifactCollection:
        | { __typename: 'ArtifactPortfolio'; name: string; project: { id: string; name: string; entity: { name: string } } | null }
        | { __typename: 'ArtifactSequence'; name: string; project: { id: string; name: string; entity: { name: string } } | null }
        | null;
      artifact: {
        __typename: 'Artifact';
        id: string;
        versionIndex: number | null;
        state: ArtifactState;
        size: number;
        digest: string;
        fileCount: number;
        artifactType: { name: string };
      } | null;
    } | null;
  } | null;
};

export type ArtifactMembershipFragment = {
  __typename: 'ArtifactCollectionMembership';
  id: string;
  versionIndex: number | null;
  aliases: Array<{ __typename: 'ArtifactAlias'; id: string; alias: string }>;
  artifactCollection:
    | { __typename: 'ArtifactPortfolio'; name: string; project: { id: string; name: string; entity: { name: string } } | null }
    | { __typename: 'ArtifactSequence'; name: string; project: { id: string; name: string; entity: { name: string } } | null }
    | null;
  artifact: {
    __typename: 'Artifact';
    id: string;
    versionIndex: number | null;
    state: ArtifactState;
    size: number;
    digest: string;
    fileCount: number;
    artifactType: { name: string };
  } | null;
};

export type ArtifactAliasFragment = { __typename: 'ArtifactAlias'; id: string; alias: string };

type CollectionInfoFragment_ArtifactPortfolio = {
  __typename: 'ArtifactPortfolio';
  name: string;
  project: { id: string; name: string; entity: { name: string } } | null;
};

type CollectionInfoFragment_ArtifactSequence = {
  __typename: 'ArtifactSequence';
  name: string;
  project: { id: string; name: string; entity: { name: string } } | null;
};

export type CollectionInfoFragment = CollectionInfoFragment_ArtifactPortfolio | CollectionInfoFragment_ArtifactSequence;

export type ProjectInfoFragment = { id: string; name: string; entity: { name: string } };

export type ArtifactFragment = {
  __typename: 'Artifact';
  id: string;
  versionIndex: number | null;
  state: ArtifactState;
  size: number;
  digest: string;
  fileCount: number;
  artifactType: { name: string };
};

export type FetchArtifactManifestQueryVariables = Exact<{
  id: string;
}>;

export type FetchArtifactManifestQuery = { artifact: { currentManifest: { file: { directUrl: string } } | null } | null };

export type DeferredManifestFragment = { file: { directUrl: string } };

export type FetchOrganizationQueryVariables = Exact<{
  org: string;
}>;

export type FetchOrganizationQuery = { organization: { id: string; name: string; orgEntity: { id: string; name: string } | null } | null };

export type ServerFeaturesQueryVariables = Exact<{ [key: string]: never }>;

export type ServerFeaturesQuery = { serverInfo: { features: Array<{ name: string; isEnabled: boolean } | null> } | null };

export const ArtifactAliasFragmentDoc = {
  kind: 'Document',
  definitions: [
    {
      kind: 'FragmentDefinition',
      name: { kind: 'Name', value: 'ArtifactAliasFragment' },
      typeCondition: { kind: 'NamedType', name: { kind: 'Name', value: 'ArtifactAlias' } },
      selectionSet: {
        kind: 'SelectionSet',
        selections: [
          { kind: 'Field', name: { kind: 'Name', value: '__typename' } },
          { kind: 'Field', name: { kind: 'Name', value: 'id' } },
          { kind: 'Field', name: { kind: 'Name', value: 'alias' } },
        ],
      },
    },
  ],
} as unknown as DocumentNode<ArtifactAliasFragment, unknown>;
export const ProjectInfoFragmentDoc = {
  kind: 'Document',
  definitions: [
    {
      kind: 'FragmentDefinition',
      name: { kind: 'Name', value: 'ProjectInfoFragment' },
      typeCondition: { kind: 'NamedType', name: { kind: 'Name', value: 'Project' } },
      selectionSet: {
        kind: 'SelectionSet',
        selections: [
          { kind: 'Field', name: { kind: 'Name', value: 'id' } },
          { kind: 'Field', name: { kind: 'Name', value: 'name' } },
          {
            kind: 'Field',
            name: { kind: 'Name', value: 'entity' },
            selectionSet: { kind: 'SelectionSet', selections: [{ kind: 'Field', name: { kind: 'Name', value: 'name' } }] },
          },
        ],
      },
    },
  ],
} as unknown as DocumentNode<ProjectInfoFragment, unknown>;
export const CollectionInfoFragmentDoc = {
  kind: 'Document',
  definitions: [
    {
      kind: 'FragmentDefinition',
      name: { kind: 'Name', value: 'CollectionInfoFragment' },
      typeCondition: { kind: 'NamedType', name: { kind: 'Name', value: 'ArtifactCollection' } },
      selectionSet: {
        kind: 'SelectionSet',
        selections: [
          { kind: 'Field', name: { kind: 'Name', value: '__typename' } },
          { kind: 'Field', name: { kind: 'Name', value: 'name' } },
          {
            kind: 'Field',
            name: { kind: 'Name', value: 'project' },
            selectionSet: {
              kind: 'SelectionSet',
              selections: [{ kind: 'FragmentSpread', name: { kind: 'Name', value: 'ProjectInfoFragment' } }],
            },
          },
        ],
      },
    },
    {
      kind: 'FragmentDefinition',
      name: { kind: 'Name', value: 'ProjectInfoFragment' },
      typeCondition: { kind: 'NamedType', name: { kind: 'Name', value: 'Project' } },
      selectionSet: {
        kind: 'SelectionSet',
        selections: [
          { kind: 'Field', name: { kind: 'Name', value: 'id' } },
          { kind: 'Field', name: { kind: 'Name', value: 'name' } },
          {
            kind: 'Field',
            name: { kind: 'Name', value: 'entity' },
            selectionSet: { kind: 'SelectionSet', selections: [{ kind: 'Field', name: { kind: 'Name', value: 'name' } }] },
          },
        ],
      },
    },
  ],
} as unknown as DocumentNode<CollectionInfoFragment, unknown>;
export const ArtifactFragmentDoc = {
  kind: 'Document',
  definitions: [
    {
      kind: 'FragmentDefinition',
      name: { kind: 'Name', value: 'ArtifactFragment' },
      typeCondition: { kind: 'NamedType', name: { kind: 'Name', value: 'Artifact' } },
      selectionSet: {
        kind: 'SelectionSet',
        selections: [
          { kind: 'Field', name: { kind: 'Name', value: '__typename' } },
          { kind: 'Field', name: { kind: 'Name', value: 'id' } },
          { kind: 'Field', name: { kind: 'Name', value: 'versionIndex' } },
          {
            kind: 'Field',
            name: { kind: 'Name', value: 'artifactType' },
            selectionSet: { kind: 'SelectionSet', selections: [{ kind: 'Field', name: { kind: 'Name', value: 'name' } }] },
          },
          { kind: 'Field', name: { kind: 'Name', value: 'state' } },
          { kind: 'Field', name: { kind: 'Name', value: 'size' } },
          { kind: 'Field', name: { kind: 'Name', value: 'digest' } },
          { kind: 'Field', name: { kind: 'Name', value: 'fileCount' } },
        ],
      },
    },
  ],
} as unknown as DocumentNode<ArtifactFragment, unknown>;
export const ArtifactMembershipFragmentDoc = {
  kind: 'Document',
  definitions: [
    {
      kind: 'FragmentDefinition',
      name: { kind: 'Name', value: 'ArtifactMembershipFragment' },
      typeCondition: { kind: 'NamedType', name: { kind: 'Name', value: 'ArtifactCollectionMembership' } },
      selectionSet: {
        kind: 'SelectionSet',
        selections: [
          { kind: 'Field', name: { kind: 'Name', value: '__typename' } },
          { kind: 'Field', name: { kind: 'Name', value: 'id' } },
          { kind: 'Field', name: { kind: 'Name', value: 'versionIndex' } },
          {
            kind: 'Field',
            name: { kind: 'Name', value: 'aliases' },
            selectionSet: {
              kind: 'SelectionSet',
              selections: [{ kind: 'FragmentSpread', name: { kind: 'Name', value: 'ArtifactAliasFragment' } }],
            },
          },
          {
            kind: 'Field',
            name: { kind: 'Name', value: 'artifactCollection' },
            selectionSet: {
              kind: 'SelectionSet',
              selections: [{ kind: 'FragmentSpread', name: { kind: 'Name', value: 'CollectionInfoFragment' } }],
            },
          },
          {
            kind: 'Field',
            name: { kind: 'Name', value: 'artifact' },
            selectionSet: {
              kind: 'SelectionSet',
              selections: [{ kind: 'FragmentSpread', name: { kind: 'Name', value: 'ArtifactFragment' } }],
            },
          },
        ],
      },
    },
    {
      kind: 'FragmentDefinition',
      name: { kind: 'Name', value: 'ProjectInfoFragment' },
      typeCondition: { kind: 'NamedType', name: { kind: 'Name', value: 'Project' } },
      selectionSet: {
        kind: 'SelectionSet',
        selections: [
          { kind: 'Field', name: { kind: 'Name', value: 'id' } },
          { kind: 'Field', name: { kind: 'Name', value: 'name' } },
          {
            kind: 'Field',
            name: { kind: 'Name', value: 'entity' },
            selectionSet: { kind: 'SelectionSet', selections: [{ kind: 'Field', name: { kind: 'Name', value: 'name' } }] },
          },
        ],
      },
    },
    {
      kind: 'FragmentDefinition',
      name: { kind: 'Name', value: 'ArtifactAliasFragment' },
      typeCondition: { kind: 'NamedType', name: { kind: 'Name', value: 'ArtifactAlias' } },
      selectionSet: {
        kind: 'SelectionSet',
        selections: [
          { kind: 'Field', name: { kind: 'Name', value: '__typename' } },
          { kind: 'Field', name: { kind: 'Name', value: 'id' } },
          { kind: 'Field', name: { kind: 'Name', value: 'alias' } },
        ],
      },
    },
    {
      kind: 'FragmentDefinition',
      name: { kind: 'Name', value: 'CollectionInfoFragment' },
      typeCondition: { kind: 'NamedType', name: { kind: 'Name', value: 'ArtifactCollection' } },
      selectionSet: {
        kind: 'SelectionSet',
        selections: [
          { kind: 'Field', name: { kind: 'Name', value: '__typename' } },
          { kind: 'Field', name: { kind: 'Name', value: 'name' } },
          {
            kind: 'Field',
            name: { kind: 'Name', value: 'project' },
            selectionSet: {
              kind: 'SelectionSet',
              selections: [{ kind: 'FragmentSpread', name: { kind: 'Name', value: 'ProjectInfoFragment' } }],
            },
          },
        ],
      },
    },
    {
      kind: 'FragmentDefinition',
      name: { kind: 'Name', value: 'ArtifactFragment' },
      typeCondition: { kind: 'NamedType', name: { kind: 'Name', value: 'Artifact' } },
      selectionSet: {
        kind: 'SelectionSet',
        selections: [
          { kind: 'Field', name: { kind: 'Name', value: '__typename' } },
          { kind: 'Field', name: { kind: 'Name', value: 'id' } },
          { kind: 'Field', name: { kind: 'Name', value: 'versionIndex' } },
          {
            kind: 'Field',
            name: { kind: 'Name', value: 'artifactType' },
            selectionSet: { kind: 'SelectionSet', selections: [{ kind: 'Field', name: { kind: 'Name', value: 'name' } }] },
          },
          { kind: 'Field', name: { kind: 'Name', value: 'state' } },
          { kind: 'Field', name: { kind: 'Name', value: 'size' } },
          { kind: 'Field', name: { kind: 'Name', value: 'digest' } },
          { kind: 'Field', name: { kind: 'Name', value: 'fileCount' } },
        ],
      },
    },
  ],
} as unknown as DocumentNode<ArtifactMembershipFragment, unknown>;
export const DeferredManifestFragmentDoc = {
  kind: 'Document',
  definitions: [
    {
      kind: 'FragmentDefinition',
      name: { kind: 'Name', value: 'DeferredManifestFragment' },
      typeCondition: { kind: 'NamedType', name: { kind: 'Name', value: 'ArtifactManifest' } },
      selectionSet: {
        kind: 'SelectionSet',
        selections: [
          {
            kind: 'Field',
            name: { kind: 'Name', value: 'file' },
            selectionSet: { kind: 'SelectionSet', selections: [{ kind: 'Field', name: { kind: 'Name', value: 'directUrl' } }] },
          },
        ],
      },
    },
  ],
} as unknown as DocumentNode<DeferredManifestFragment, unknown>;
export const ArtifactMembershipByNameDocument = {
  kind: 'Document',
  definitions: [
    {
      kind: 'OperationDefinition',
      operation: 'query',
      name: { kind: 'Name', value: 'ArtifactMembershipByName' },
      variableDefinitions: [
        {
          kind: 'VariableDefinition',
          variable: { kind: 'Variable', name: { kind: 'Name', value: 'entity' } },
          type: { kind: 'NonNullType', type: { kind: 'NamedType', name: { kind: 'Name', value: 'String' } } },
        },
        {
          kind: 'VariableDefinition',
          variable: { kind: 'Variable', name: { kind: 'Name', value: 'project' } },
          type: { kind: 'NonNullType', type: { kind: 'NamedType', name: { kind: 'Name', value: 'String' } } },
        },
        {
          kind: 'VariableDefinition',
          variable: { kind: 'Variable', name: { kind: 'Name', value: 'name' } },
          type: { kind: 'NonNullType', type: { kind: 'NamedType', name: { kind: 'Name', value: 'String' } } },
        },
      ],
      selectionSet: {
        kind: 'SelectionSet',
        selections: [
          {
            kind: 'Field',
            name: { kind: 'Name', value: 'project' },
            arguments: [
              {
                kind: 'Argument',
                name: { kind: 'Name', value: 'name' },
                value: { kind: 'Variable', name: { kind: 'Name', value: 'project' } },
              },
              {
                kind: 'Argument',
                name: { kind: 'Name', value: 'entityName' },
                value: { kind: 'Variable', name: { kind: 'Name', value: 'entity' } },
              },
            ],
            selectionSet: {
              kind: 'SelectionSet',
              selections: [
                {
                  kind: 'Field',
                  name: { kind: 'Name', value: 'artifactCollectionMembership' },
                  arguments: [
                    {
                      kind: 'Argument',
                      name: { kind: 'Name', value: 'name' },
                      value: { kind: 'Variable', name: { kind: 'Name', value: 'name' } },
                    },
                  ],
                  selectionSet: {
                    kind: 'SelectionSet',
                    selections: [{ kind: 'FragmentSpread', name: { kind: 'Name', value: 'ArtifactMembershipFragment' } }],
                  },
                },
              ],
            },
          },
        ],
      },
    },
    {
      kind: 'FragmentDefinition',
      name: { kind: 'Name', value: 'ArtifactAliasFragment' },
      typeCondition: { kind: 'NamedType', name: { kind: 'Name', value: 'ArtifactAlias' } },
      selectionSet: {
        kind: 'SelectionSet',
        selections: [
          { kind: 'Field', name: { kind: 'Name', value: '__typename' } },
          { kind: 'Field', name: { kind: 'Name', value: 'id' } },
          { kind: 'Field', name: { kind: 'Name', value: 'alias' } },
        ],
      },
    },
    {
      kind: 'FragmentDefinition',
      name: { kind: 'Name', value: 'ProjectInfoFragment' },
      typeCondition: { kind: 'NamedType', name: { kind: 'Name', value: 'Project' } },
      selectionSet: {
        kind: 'SelectionSet',
        selections: [
          { kind: 'Field', name: { kind: 'Name', value: 'id' } },
          { kind: 'Field', name: { kind: 'Name', value: 'name' } },
          {
            kind: 'Field',
            name: { kind: 'Name', value: 'entity' },
            selectionSet: { kind: 'SelectionSet', selections: [{ kind: 'Field', name: { kind: 'Name', value: 'name' } }] },
          },
        ],
      },
    },
    {
      kind: 'FragmentDefinition',
      name: { kind: 'Name', value: 'CollectionInfoFragment' },
      typeCondition: { kind: 'NamedType', name: { kind: 'Name', value: 'ArtifactCollection' } },
      selectionSet: {
        kind: 'SelectionSet',
        selections: [
          { kind: 'Field', name: { kind: 'Name', value: '__typename' } },
          { kind: 'Field', name: { kind: 'Name', value: 'name' } },
          {
            kind: 'Field',
            name: { kind: 'Name', value: 'project' },
            selectionSet: {
              kind: 'SelectionSet',
              selections: [{ kind: 'FragmentSpread', name: { kind: 'Name', value: 'ProjectInfoFragment' } }],
            },
          },
        ],
      },
    },
    {
      kind: 'FragmentDefinition',
      name: { kind: 'Name', value: 'ArtifactFragment' },
      typeCondition: { kind: 'NamedType', name: { kind: 'Name', value: 'Artifact' } },
      selectionSet: {
        kind: 'SelectionSet',
        selections: [
          { kind: 'Field', name: { kind: 'Name', value: '__typename' } },
          { kind: 'Field', name: { kind: 'Name', value: 'id' } },
          { kind: 'Field', name: { kind: 'Name', value: 'versionIndex' } },
          {
            kind: 'Field',
            name: { kind: 'Name', value: 'artifactType' },
            selectionSet: { kind: 'SelectionSet', selections: [{ kind: 'Field', name: { kind: 'Name', value: 'name' } }] },
          },
          { kind: 'Field', name: { kind: 'Name', value: 'state' } },
          { kind: 'Field', name: { kind: 'Name', value: 'size' } },
          { kind: 'Field', name: { kind: 'Name', value: 'digest' } },
          { kind: 'Field', name: { kind: 'Name', value: 'fileCount' } },
        ],
      },
    },
    {
      kind: 'FragmentDefinition',
      name: { kind: 'Name', value: 'ArtifactMembershipFragment' },
      typeCondition: { kind: 'NamedType', name: { kind: 'Name', value: 'ArtifactCollectionMembership' } },
      selectionSet: {
        kind: 'SelectionSet',
        selections: [
          { kind: 'Field', name: { kind: 'Name', value: '__typename' } },
          { kind: 'Field', name: { kind: 'Name', value: 'id' } },
          { kind: 'Field', name: { kind: 'Name', value: 'versionIndex' } },
          {
            kind: 'Field',
            name: { kind: 'Name', value: 'aliases' },
            selectionSet: {
              kind: 'SelectionSet',
              selections: [{ kind: 'FragmentSpread', name: { kind: 'Name', value: 'ArtifactAliasFragment' } }],
            },
          },
          {
            kind: 'Field',
            name: { kind: 'Name', value: 'artifactCollection' },
            selectionSet: {
              kind: 'SelectionSet',
              selections: [{ kind: 'FragmentSpread', name: { kind: 'Name', value: 'CollectionInfoFragment' } }],
            },
          },
          {
            kind: 'Field',
            name: { kind: 'Name', value: 'artifact' },
            selectionSet: {
              kind: 'SelectionSet',
              selections: [{ kind: 'FragmentSpread', name: { kind: 'Name', value: 'ArtifactFragment' } }],
            },
          },
        ],
      },
    },
  ],
} as unknown as DocumentNode<ArtifactMembershipByNameQuery, ArtifactMembershipByNameQueryVariables>;
export const FetchArtifactManifestDocument = {
  kind: 'Document',
  definitions: [
    {
      kind: 'OperationDefinition',
      operation: 'query',
      name: { kind: 'Name', value: 'FetchArtifactManifest' },
      variableDefinitions: [
        {
          kind: 'VariableDefinition',
          variable: { kind: 'Variable', name: { kind: 'Name', value: 'id' } },
          type: { kind: 'NonNullType', type: { kind: 'NamedType', name: { kind: 'Name', value: 'ID' } } },
        },
      ],
      selectionSet: {
        kind: 'SelectionSet',
        selections: [
          {
            kind: 'Field',
            name: { kind: 'Name', value: 'artifact' },
            arguments: [
              { kind: 'Argument', name: { kind: 'Name', value: 'id' }, value: { kind: 'Variable', name: { kind: 'Name', value: 'id' } } },
            ],
            selectionSet: {
              kind: 'SelectionSet',
              selections: [
                {
                  kind: 'Field',
                  name: { kind: 'Name', value: 'currentManifest' },
                  selectionSet: {
                    kind: 'SelectionSet',
                    selections: [{ kind: 'FragmentSpread', name: { kind: 'Name', value: 'DeferredManifestFragment' } }],
                  },
                },
              ],
            },
          },
        ],
      },
    },
    {
      kind: 'FragmentDefinition',
      name: { kind: 'Name', value: 'DeferredManifestFragment' },
      typeCondition: { kind: 'NamedType', name: { kind: 'Name', value: 'ArtifactManifest' } },
      selectionSet: {
        kind: 'SelectionSet',
        selections: [
          {
            kind: 'Field',
            name: { kind: 'Name', value: 'file' },
            selectionSet: { kind: 'SelectionSet', selections: [{ kind: 'Field', name: { kind: 'Name', value: 'directUrl' } }] },
          },
        ],
      },
    },
  ],
} as unknown as DocumentNode<FetchArtifactManifestQuery, FetchArtifactManifestQueryVariables>;
export const FetchOrganizationDocument = {
  kind: 'Document',
  definitions: [
    {
      kind: 'OperationDefinition',
      operation: 'query',
      name: { kind: 'Name', value: 'FetchOrganization' },
      variableDefinitions: [
        {
          kind: 'VariableDefinition',
          variable: { kind: 'Variable', name: { kind: 'Name', value: 'org' } },
          type: { kind: 'NonNullType', type: { kind: 'NamedType', name: { kind: 'Name', value: 'String' } } },
        },
      ],
      selectionSet: {
        kind: 'SelectionSet',
        selections: [
          {
            kind: 'Field',
            name: { kind: 'Name', value: 'organization' },
            arguments: [
              {
                kind: 'Argument',
                name: { kind: 'Name', value: 'name' },
                value: { kind: 'Variable', name: { kind: 'Name', value: 'org' } },
              },
            ],
            selectionSet: {
              kind: 'SelectionSet',
              selections: [
                { kind: 'Field', name: { kind: 'Name', value: 'id' } },
                { kind: 'Field', name: { kind: 'Name', value: 'name' } },
                {
                  kind: 'Field',
                  name: { kind: 'Name', value: 'orgEntity' },
                  selectionSet: {
                    kind: 'SelectionSet',
                    selections: [
                      { kind: 'Field', name: { kind: 'Name', value: 'id' } },
                      { kind: 'Field', name: { kind: 'Name', value: 'name' } },
                    ],
                  },
                },
              ],
            },
          },
        ],
      },
    },
  ],
} as unknown as DocumentNode<FetchOrganizationQuery, FetchOrganizationQueryVariables>;
export const ServerFeaturesQueryDocument = {
  kind: 'Document',
  definitions: [
    {
      kind: 'OperationDefinition',
      operation: 'query',
      name: { kind: 'Name', value: 'ServerFeaturesQuery' },
      selectionSet: {
        kind: 'SelectionSet',
        selections: [
          {
            kind: 'Field',
            name: { kind: 'Name', value: 'serverInfo' },
            selectionSet: {
              kind: 'SelectionSet',
              selections: [
                {
                  kind: 'Field',
                  name: { kind: 'Name', value: 'features' },
                  selectionSet: {
                    kind: 'SelectionSet',
                    selections: [
                      { kind: 'Field', name: { kind: 'Name', value: 'name' } },
                      { kind: 'Field', name: { kind: 'Name', value: 'isEnabled' } },
                    ],
                  },
                },
              ],
            },
          },
        ],
      },
    },
  ],
} as unknown as DocumentNode<ServerFeaturesQuery, ServerFeaturesQueryVariables>;
