# A Flatcar Kubernetes cluster on libvirt: one controller (kubeadm init) and worker_count workers
# (kubeadm join), each booting Flatcar's QEMU image with its Ignition (../flatcar-ignition, which
# merges Slipway's snippet) through fw_cfg, on a NAT network with fixed addresses.
locals {
  pool_path  = var.pool_path != "" ? var.pool_path : "/var/lib/libvirt/images/${var.cluster_name}"
  controller = cidrhost(var.network_cidr, 10)
  nodes = merge(
    { "${var.cluster_name}-controller" = { role = "controller", ip = local.controller } },
    { for i in range(var.worker_count) : "${var.cluster_name}-worker-${i}" => { role = "worker", ip = cidrhost(var.network_cidr, 20 + i) } },
  )
}

resource "libvirt_pool" "cluster" {
  name = var.cluster_name
  type = "dir"
  target {
    path = local.pool_path
  }
}

resource "libvirt_volume" "flatcar" {
  name   = "${var.cluster_name}-flatcar.qcow2"
  pool   = libvirt_pool.cluster.name
  source = var.flatcar_image
  format = "qcow2"
}

resource "libvirt_volume" "node" {
  for_each       = local.nodes
  name           = "${each.key}.qcow2"
  pool           = libvirt_pool.cluster.name
  base_volume_id = libvirt_volume.flatcar.id
  format         = "qcow2"
}

resource "libvirt_network" "cluster" {
  name      = var.cluster_name
  mode      = "nat"
  domain    = "${var.cluster_name}.local"
  addresses = [var.network_cidr]
  dns {
    enabled = true
  }
  dhcp {
    enabled = true
  }
}

module "ignition" {
  source                = "../flatcar-ignition"
  for_each              = local.nodes
  name                  = each.key
  role                  = each.value.role
  controller_address    = local.controller
  kubernetes_version    = var.kubernetes_version
  kubernetes_sysext_url = var.kubernetes_sysext_url
  cni_manifest_url      = var.cni_manifest_url
  bootstrap_token       = var.bootstrap_token
  ca_cert_pem           = var.ca_cert_pem
  ca_key_pem            = each.value.role == "controller" ? var.ca_key_pem : ""
  ssh_authorized_keys   = var.ssh_authorized_keys
  slipway_ignition      = var.slipway_ignition
}

resource "libvirt_ignition" "node" {
  for_each = local.nodes
  name     = "${each.key}.ign"
  pool     = libvirt_pool.cluster.name
  content  = module.ignition[each.key].ignition
}

resource "libvirt_domain" "node" {
  for_each        = local.nodes
  name            = each.key
  type            = var.domain_type
  memory          = var.memory_mb
  vcpu            = var.vcpus
  fw_cfg_name     = "opt/org.flatcar-linux/config"
  coreos_ignition = libvirt_ignition.node[each.key].id
  qemu_agent      = false

  disk {
    volume_id = libvirt_volume.node[each.key].id
  }

  network_interface {
    network_id     = libvirt_network.cluster.id
    hostname       = each.key
    addresses      = [each.value.ip]
    wait_for_lease = false
  }

  console {
    type        = "pty"
    target_type = "serial"
    target_port = "0"
  }
}
