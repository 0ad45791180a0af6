//! Container and pod ids in cgroup paths, as Docker, containerd, CRI-O, Podman and the
//! kubelet name their groups (cgroupfs and systemd drivers).

/// What a cgroup path says about a container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerInfo {
    /// Runtime that named the group: `docker`, `containerd`, `cri-o`, `podman`, or
    /// `container` when the path carries a bare id (cgroupfs drivers under `/kubepods`).
    pub runtime: &'static str,
    /// The container id (64 hex digits), when the path has one.
    pub container_id: Option<String>,
    /// The Kubernetes pod UID (`8-4-4-4-12` hex, dashes), when the path has one.
    pub pod_uid: Option<String>,
}

impl ContainerInfo {
    /// The first 12 hex digits of the container id, as `docker ps` shows it.
    pub fn short_id(&self) -> Option<&str> {
        self.container_id.as_deref().map(|c| &c[..12])
    }
}

/// Prefixes of container groups, and the runtime each stands for (the conmon groups of
/// CRI-O and Podman, `crio-conmon-…`, `libpod-conmon-…`, are not containers: the id check
/// rejects them).
const RUNTIME_PREFIXES: [(&str, &str); 5] = [
    ("docker-", "docker"),
    ("cri-containerd-", "containerd"),
    ("crio-", "cri-o"),
    ("libpod-", "podman"),
    ("containerd-", "containerd"),
];

fn is_container_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A pod UID as the kubelet writes it: 32 hex digits in 8-4-4-4-12 groups, separated by
/// `-` (cgroupfs) or `_` (systemd); returned with dashes.
fn pod_uid(s: &str) -> Option<String> {
    let b = s.as_bytes();
    if b.len() != 36 {
        return None;
    }
    for (i, &c) in b.iter().enumerate() {
        let sep = matches!(i, 8 | 13 | 18 | 23);
        if sep != matches!(c, b'-' | b'_') || (!sep && !c.is_ascii_hexdigit()) {
            return None;
        }
    }
    Some(s.replace('_', "-"))
}

/// The container and pod a cgroup path names, if any: the innermost container group
/// (`docker-<id>.scope`, `cri-containerd-<id>.scope`, `crio-<id>.scope`,
/// `libpod-<id>.scope`, or a bare 64-hex id as cgroupfs drivers write it) and the pod
/// (`pod<uid>` under a `kubepods` group, or `kubepods-…-pod<uid>.slice`).
pub fn container_info(path: &str) -> Option<ContainerInfo> {
    let mut info = ContainerInfo {
        runtime: "container",
        container_id: None,
        pod_uid: None,
    };
    let mut in_kubepods = false;
    let mut parent = "";
    for comp in path.split('/').filter(|c| !c.is_empty()) {
        let name = comp
            .strip_suffix(".scope")
            .or_else(|| comp.strip_suffix(".slice"))
            .unwrap_or(comp);
        if name.starts_with("kubepods") {
            in_kubepods = true;
        }
        if in_kubepods {
            // `pod<uid>` (cgroupfs) or `kubepods-burstable-pod<uid_>` (systemd).
            let last = name.rsplit('-').next().unwrap_or(name);
            let uid = last.strip_prefix("pod").and_then(pod_uid).or_else(|| {
                // cgroupfs: the dashes of the uid are the component's own.
                name.strip_prefix("pod").and_then(pod_uid)
            });
            if let Some(u) = uid {
                info.pod_uid = Some(u);
                parent = comp;
                continue;
            }
        }
        let found = RUNTIME_PREFIXES.iter().find_map(|&(prefix, runtime)| {
            let id = name.strip_prefix(prefix)?;
            is_container_id(id).then_some((runtime, id))
        });
        if let Some((runtime, id)) = found {
            info.runtime = runtime;
            info.container_id = Some(id.to_ascii_lowercase());
        } else if is_container_id(name) {
            info.runtime = if parent == "docker" {
                "docker"
            } else {
                "container"
            };
            info.container_id = Some(name.to_ascii_lowercase());
        }
        parent = comp;
    }
    (info.container_id.is_some() || info.pod_uid.is_some()).then_some(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "4fa6e0f0c6786287e131c3852c58a2e01cc697a68231826813597e4994f1d6e2";
    const POD: &str = "8dd3a1e9-2f9a-4d3b-9a36-2f4c4f1b7c11";

    fn get(path: &str) -> (Option<&'static str>, Option<String>, Option<String>) {
        match container_info(path) {
            Some(i) => (Some(i.runtime), i.container_id, i.pod_uid),
            None => (None, None, None),
        }
    }

    #[test]
    fn docker_paths() {
        let want = (Some("docker"), Some(ID.to_string()), None);
        assert_eq!(get(&format!("/system.slice/docker-{ID}.scope")), want);
        assert_eq!(get(&format!("/docker/{ID}")), want);
        // A container's own systemd below its group.
        assert_eq!(
            get(&format!("/system.slice/docker-{ID}.scope/init.scope")),
            want
        );
        assert_eq!(
            container_info(&format!("/docker/{ID}")).unwrap().short_id(),
            Some("4fa6e0f0c678")
        );
    }

    #[test]
    fn kubernetes_systemd_driver() {
        let uid = POD.replace('-', "_");
        assert_eq!(
            get(&format!(
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid}.slice/cri-containerd-{ID}.scope"
            )),
            (Some("containerd"), Some(ID.into()), Some(POD.into()))
        );
        assert_eq!(
            get(&format!(
                "/kubepods.slice/kubepods-pod{uid}.slice/crio-{ID}.scope"
            )),
            (Some("cri-o"), Some(ID.into()), Some(POD.into()))
        );
        // The pod's own group (no container): the pod alone.
        assert_eq!(
            get(&format!(
                "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{uid}.slice"
            )),
            (Some("container"), None, Some(POD.into()))
        );
        // CRI-O's conmon is not the container.
        assert_eq!(
            get(&format!(
                "/kubepods.slice/kubepods-pod{uid}.slice/crio-conmon-{ID}.scope"
            )),
            (Some("container"), None, Some(POD.into()))
        );
    }

    #[test]
    fn kubernetes_cgroupfs_driver() {
        assert_eq!(
            get(&format!("/kubepods/burstable/pod{POD}/{ID}")),
            (Some("container"), Some(ID.into()), Some(POD.into()))
        );
        assert_eq!(
            get(&format!("/kubepods/pod{POD}/crio-{ID}")),
            (Some("cri-o"), Some(ID.into()), Some(POD.into()))
        );
    }

    #[test]
    fn podman_and_plain_paths() {
        assert_eq!(
            get(&format!(
                "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope/container"
            )),
            (Some("podman"), Some(ID.into()), None)
        );
        assert_eq!(
            get(&format!("/machine.slice/libpod-conmon-{ID}.scope")),
            (None, None, None)
        );
        for p in [
            "/",
            "/system.slice/sshd.service",
            "/user.slice/user-0.slice/session-3.scope",
            // Not 64 hex digits; a pod-like name outside kubepods.
            "/docker/4fa6e0f0c678",
            &format!("/system.slice/pod{POD}"),
        ] {
            assert_eq!(get(p), (None, None, None), "{p}");
        }
    }
}
