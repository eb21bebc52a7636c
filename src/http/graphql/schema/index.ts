import { builder } from '../builder.js';
import { checkTimestampArguments } from '../timestamp-args.js';
import './enums.js';
import './errors.js';
import './identity.js';
import './endpoints.js';
import './artifacts.js';
import './chat.js';
import './live.js';
import './replicas.js';
import './metrics.js';

export const schema = checkTimestampArguments(builder.toSchema({ sortSchema: true }));
