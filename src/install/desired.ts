import type { KnativeResource } from "../api/knative.ts";
import { stampForApply } from "../apply/apply.ts";
import { anchorName } from "../apply/ownership.ts";
import type { KubeObject } from "../kube/object.ts";
import { type Release, render } from "../render/index.ts";
import { hubOwnerRef, installNamespace, ownerOf } from "./identity.ts";

/** The desired objects of a CR on its cluster: the release rendered for the CR's install namespace. */
export function renderInstall(resource: KnativeResource, release: Release): KubeObject[] {
  return render(resource, release, installNamespace(resource));
}

/**
 * The objects an apply sends, exactly as `applyInstall` stamps them: the install namespace left out (it
 * is created once and never applied), ownership labels and owner reference, the desired-hash. `ownerUid`
 * is the uid of the anchor (spoke) or of the hub CR (hub install); empty when there is none yet.
 */
export function desiredObjects(resource: KnativeResource, rendered: readonly KubeObject[], ownerUid: string) {
  const owner = ownerOf(resource);
  const ownerRef = hubOwnerRef(resource) ?? {
    apiVersion: "v1",
    kind: "ConfigMap",
    name: anchorName(owner),
    uid: ownerUid,
  };
  return stampForApply(rendered, owner, { ...ownerRef, uid: ownerUid }, installNamespace(resource));
}
