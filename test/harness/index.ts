export { freePort } from './free-port.js';
export { startRegistry, TOKEN_SERVICE, type RegistryAuth, type RegistryHandle, type RegistryOptions } from './registry.js';
export type { RepositoryAccess, TokenIssuerHandle, TokenRequestRecord } from './token-issuer.js';
export {
  startFaultProxy,
  type Fault,
  type FaultProxy,
  type FaultProxyOptions,
  type FaultRule,
  type Origin,
  type ProxiedRequest,
  type ProxyStats,
  type RequestRecord,
} from './fault-proxy.js';
export { startForwardProxy, type ForwardProxyHandle, type ForwardProxyOptions } from './forward-proxy.js';
export { startTcpFaults, type TcpConnection, type TcpFaults } from './tcp-faults.js';
export { GRAPH_PATH, startUpdateService, type UpdateServiceFault, type UpdateServiceHandle, type UpdateServiceOptions, type UpdateServiceRequest } from './update-service.js';
