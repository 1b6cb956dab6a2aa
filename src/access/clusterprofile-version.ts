import {
  CLUSTER_PROFILE_GROUP,
  CLUSTER_PROFILE_VERSIONS,
  type ClusterProfileVersion,
} from "../api/clusterprofile.ts";
import type { KubeClient } from "../kube/client.ts";

export interface ClusterProfileResource {
  group: string;
  version: ClusterProfileVersion;
  plural: "clusterprofiles";
}

const CRD_NAME = `clusterprofiles.${CLUSTER_PROFILE_GROUP}`;
const known = (version: string | undefined): version is ClusterProfileVersion =>
  (CLUSTER_PROFILE_VERSIONS as readonly string[]).includes(version ?? "");

/**
 * Which version of ClusterProfiles to read: the CRD's storage version when it is one this reader knows
 * (no conversion on the way, so the objects read are what the cluster manager wrote), else the newest
 * known version the hub serves (discovery; the CRD itself may not be readable), else v1alpha1 so that the
 * error names the classic API.
 */
export async function clusterProfileResource(hub: KubeClient): Promise<ClusterProfileResource> {
  const of = (version: ClusterProfileVersion): ClusterProfileResource => ({
    group: CLUSTER_PROFILE_GROUP,
    version,
    plural: "clusterprofiles",
  });
  try {
    const crd = await hub.rest.request<{
      spec: { versions: { name: string; served: boolean; storage: boolean }[] };
    }>({
      method: "GET",
      path: `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${CRD_NAME}`,
    });
    const storage = crd.body.spec.versions.find((v) => v.storage && v.served)?.name;
    if (known(storage)) return of(storage);
  } catch {
    // No right to read CRDs, or no CRD: discovery says what is served.
  }
  try {
    const groups = await hub.rest.request<{ groups: { name: string; versions: { version: string }[] }[] }>({
      method: "GET",
      path: "/apis",
    });
    const served = groups.body.groups
      .find((g) => g.name === CLUSTER_PROFILE_GROUP)
      ?.versions.map((v) => v.version);
    const newest = CLUSTER_PROFILE_VERSIONS.find((v) => served?.includes(v));
    if (newest !== undefined) return of(newest);
  } catch {
    // The read that follows reports the hub's answer.
  }
  return of("v1alpha1");
}
