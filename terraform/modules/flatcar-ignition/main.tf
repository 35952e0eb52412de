# One Flatcar node's Ignition (spec 3.4) for a kubeadm cluster with Slipway: no provider, so it
# works with any platform (pass the output as user data / fw_cfg / metadata) and offline.
locals {
  slipway = var.slipway_ignition != "" ? var.slipway_ignition : file("${path.module}/../../../butane/snippets/flatcar-slipway.ign")
  sysext  = "kubernetes-${var.kubernetes_version}-x86-64.raw"
  sysext_url = var.kubernetes_sysext_url != "" ? var.kubernetes_sysext_url : (
    "https://extensions.flatcar.org/extensions/${local.sysext}"
  )
  controller = var.role == "controller"
  # /usr is read-only on Flatcar: flexvolume plugins live under /opt.
  plugin_dir = "/opt/libexec/kubernetes/kubelet-plugins/volume/exec/"

  kubeadm_init = <<-EOT
    apiVersion: kubeadm.k8s.io/v1beta4
    kind: InitConfiguration
    bootstrapTokens:
      - token: "${var.bootstrap_token}"
        ttl: 24h0m0s
        usages: [signing, authentication]
        groups: ["system:bootstrappers:kubeadm:default-node-token"]
    nodeRegistration:
      name: ${var.name}
      kubeletExtraArgs:
        - name: volume-plugin-dir
          value: ${local.plugin_dir}
    ---
    apiVersion: kubeadm.k8s.io/v1beta4
    kind: ClusterConfiguration
    kubernetesVersion: ${var.kubernetes_version}
    controlPlaneEndpoint: "${var.controller_address}:6443"
    apiServer:
      certSANs: ["${var.controller_address}"]
    controllerManager:
      extraArgs:
        - name: flex-volume-plugin-dir
          value: ${local.plugin_dir}
    networking:
      podSubnet: ${var.pod_cidr}
      serviceSubnet: ${var.service_cidr}
    ---
    apiVersion: kubelet.config.k8s.io/v1beta1
    kind: KubeletConfiguration
    cgroupDriver: systemd
  EOT

  kubeadm_join = <<-EOT
    apiVersion: kubeadm.k8s.io/v1beta4
    kind: JoinConfiguration
    discovery:
      file:
        kubeConfigPath: /etc/kubernetes/discovery.conf
      tlsBootstrapToken: "${var.bootstrap_token}"
    nodeRegistration:
      name: ${var.name}
      kubeletExtraArgs:
        - name: volume-plugin-dir
          value: ${local.plugin_dir}
  EOT

  # What a worker trusts to find the controller: the CA and the address, no credentials (kubeadm
  # reads the cluster of the current context, then joins with the bootstrap token).
  discovery = <<-EOT
    apiVersion: v1
    kind: Config
    clusters:
      - name: kubernetes
        cluster:
          server: https://${var.controller_address}:6443
          certificate-authority-data: ${base64encode(var.ca_cert_pem)}
    contexts:
      - name: kubernetes
        context:
          cluster: kubernetes
    current-context: kubernetes
    users: []
  EOT

  cni_step = local.controller && var.cni_manifest_url != "" ? "ExecStartPost=/usr/bin/kubectl --kubeconfig /etc/kubernetes/admin.conf apply -f ${var.cni_manifest_url}\n" : ""

  kubeadm_unit = <<-EOT
    [Unit]
    Description=kubeadm ${local.controller ? "init" : "join"} (once: skipped when the kubelet is configured)
    Wants=network-online.target
    After=network-online.target containerd.service systemd-sysext.service
    Requires=containerd.service
    ConditionPathExists=!/etc/kubernetes/kubelet.conf
    [Service]
    Type=oneshot
    RemainAfterExit=yes
    Restart=on-failure
    RestartSec=10
    ExecStart=/usr/bin/kubeadm ${local.controller ? "init" : "join"} --config /etc/kubernetes/kubeadm.yaml
    ${local.cni_step}[Install]
    WantedBy=multi-user.target
  EOT

  file = {
    for f in concat(
      [
        { path = "/etc/hostname", mode = 420, data = "${var.name}\n" },
        { path = "/etc/kubernetes/kubeadm.yaml", mode = 384, data = local.controller ? local.kubeadm_init : local.kubeadm_join },
      ],
      local.controller ? [
        { path = "/etc/kubernetes/pki/ca.crt", mode = 420, data = var.ca_cert_pem },
        { path = "/etc/kubernetes/pki/ca.key", mode = 384, data = var.ca_key_pem },
        ] : [
        { path = "/etc/kubernetes/discovery.conf", mode = 384, data = local.discovery },
      ],
    ) : f.path => f
  }

  ignition = {
    ignition = {
      version = "3.4.0"
      config = {
        merge = [{ source = "data:;base64,${base64encode(local.slipway)}" }]
      }
    }
    passwd = {
      users = length(var.ssh_authorized_keys) > 0 ? [{ name = "core", sshAuthorizedKeys = var.ssh_authorized_keys }] : []
    }
    storage = {
      files = concat(
        [for f in local.file : {
          path      = f.path
          mode      = f.mode
          overwrite = true
          contents  = { source = "data:;base64,${base64encode(f.data)}" }
        }],
        [{
          path     = "/opt/extensions/kubernetes/${local.sysext}"
          mode     = 420
          contents = { source = local.sysext_url }
        }],
      )
      links = [{
        path   = "/etc/extensions/kubernetes.raw"
        target = "/opt/extensions/kubernetes/${local.sysext}"
        hard   = false
      }]
    }
    systemd = {
      units = [
        { name = "kubelet.service", enabled = true },
        { name = "kubeadm.service", enabled = true, contents = local.kubeadm_unit },
      ]
    }
  }
}

check "controller_has_ca_key" {
  assert {
    condition     = !local.controller || can(regex("PRIVATE KEY-----", var.ca_key_pem))
    error_message = "a controller needs ca_key_pem (kubeadm signs the cluster's certificates with it)."
  }
}
