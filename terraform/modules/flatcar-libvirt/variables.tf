variable "cluster_name" {
  description = "Prefix of every libvirt object (network, pool, volumes, domains) and the kubeconfig's cluster name."
  type        = string
  default     = "slipway"
  validation {
    condition     = can(regex("^[a-z][-a-z0-9]{0,30}$", var.cluster_name))
    error_message = "cluster_name must be a short DNS label starting with a letter."
  }
}

variable "flatcar_image" {
  description = "Flatcar's QEMU image (flatcar_production_qemu_image.img, qcow2): a local path or a URL libvirt can fetch. `make flatcar-image` downloads and verifies one."
  type        = string
}

variable "worker_count" {
  description = "Workers besides the one controller."
  type        = number
  default     = 2
  validation {
    condition     = var.worker_count >= 0 && var.worker_count <= 50
    error_message = "worker_count must be between 0 and 50."
  }
}

variable "memory_mb" {
  description = "Memory of each node in MiB (Flatcar wants at least 2048)."
  type        = number
  default     = 2048
}

variable "vcpus" {
  description = "vCPUs of each node."
  type        = number
  default     = 2
}

variable "domain_type" {
  description = "libvirt domain type: \"kvm\" with hardware virtualization, \"qemu\" for pure emulation (TCG) where there is none."
  type        = string
  default     = "kvm"
  validation {
    condition     = contains(["kvm", "qemu"], var.domain_type)
    error_message = "domain_type must be \"kvm\" or \"qemu\"."
  }
}

variable "network_cidr" {
  description = "The cluster's NAT network; the controller gets host 10 of it, workers 20, 21, ..."
  type        = string
  default     = "10.17.3.0/24"
}

variable "pool_path" {
  description = "Directory of the libvirt storage pool holding the disks and Ignition; empty means /var/lib/libvirt/images/<cluster_name>."
  type        = string
  default     = ""
}

variable "kubernetes_version" {
  description = "Kubernetes version (kubeadm, Flatcar's Kubernetes sysext)."
  type        = string
  default     = "v1.35.4"
}

variable "kubernetes_sysext_url" {
  description = "Where nodes fetch the Kubernetes sysext; empty means Flatcar's extensions server."
  type        = string
  default     = ""
}

variable "cni_manifest_url" {
  description = "CNI manifest the controller applies after kubeadm init; empty to bring your own."
  type        = string
  default     = "https://raw.githubusercontent.com/projectcalico/calico/v3.29.1/manifests/calico.yaml"
}

variable "ssh_authorized_keys" {
  description = "SSH public keys for the core user on every node."
  type        = list(string)
  default     = []
}

variable "slipway_ignition" {
  description = "Ignition merged into every node to leave reboots to Slipway; empty means butane/snippets/flatcar-slipway.ign."
  type        = string
  default     = ""
}

variable "bootstrap_token" {
  description = "kubeadm bootstrap token ([a-z0-9]{6}.[a-z0-9]{16}); `go run ./hack/cluster-pki` makes one with the certificates below."
  type        = string
  sensitive   = true
}

variable "ca_cert_pem" {
  description = "Cluster CA certificate (PEM)."
  type        = string
}

variable "ca_key_pem" {
  description = "Cluster CA key (PEM), placed on the controller for kubeadm."
  type        = string
  sensitive   = true
}

variable "admin_cert_pem" {
  description = "Admin client certificate signed by the CA (group system:masters), for the kubeconfig output."
  type        = string
}

variable "admin_key_pem" {
  description = "Key of admin_cert_pem."
  type        = string
  sensitive   = true
}
