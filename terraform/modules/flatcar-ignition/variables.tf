variable "name" {
  description = "The node's hostname and Kubernetes node name."
  type        = string
  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", var.name))
    error_message = "name must be a DNS label: lower-case letters, digits and '-', at most 63 characters."
  }
}

variable "role" {
  description = "\"controller\" (kubeadm init, the API server) or \"worker\" (kubeadm join)."
  type        = string
  validation {
    condition     = contains(["controller", "worker"], var.role)
    error_message = "role must be \"controller\" or \"worker\"."
  }
}

variable "controller_address" {
  description = "IP address or DNS name of the controller, where the API server listens on 6443."
  type        = string
}

variable "kubernetes_version" {
  description = "Kubernetes version, as kubeadm and Flatcar's Kubernetes sysext name it (vX.Y.Z)."
  type        = string
  default     = "v1.35.4"
  validation {
    condition     = can(regex("^v[0-9]+\\.[0-9]+\\.[0-9]+$", var.kubernetes_version))
    error_message = "kubernetes_version must look like v1.35.4."
  }
}

variable "kubernetes_sysext_url" {
  description = "Where Ignition fetches the Kubernetes systemd-sysext image; empty means Flatcar's extensions server for kubernetes_version."
  type        = string
  default     = ""
}

variable "bootstrap_token" {
  description = "kubeadm bootstrap token the workers join with ([a-z0-9]{6}.[a-z0-9]{16}, e.g. from `kubeadm token generate` or `go run ./hack/cluster-pki`)."
  type        = string
  sensitive   = true
  validation {
    condition     = can(regex("^[a-z0-9]{6}\\.[a-z0-9]{16}$", var.bootstrap_token))
    error_message = "bootstrap_token must match [a-z0-9]{6}.[a-z0-9]{16}."
  }
}

variable "ca_cert_pem" {
  description = "The cluster CA certificate (PEM). kubeadm uses it instead of making its own, so workers can verify the controller and the admin kubeconfig can be made without reading it back from the node."
  type        = string
  validation {
    condition     = can(regex("-----BEGIN CERTIFICATE-----", var.ca_cert_pem))
    error_message = "ca_cert_pem must be a PEM certificate."
  }
}

variable "ca_key_pem" {
  description = "The cluster CA private key (PEM); needed on the controller only, leave empty for workers."
  type        = string
  default     = ""
  sensitive   = true
}

variable "pod_cidr" {
  description = "Pod network (kubeadm networking.podSubnet)."
  type        = string
  default     = "10.244.0.0/16"
}

variable "service_cidr" {
  description = "Service network (kubeadm networking.serviceSubnet)."
  type        = string
  default     = "10.96.0.0/12"
}

variable "cni_manifest_url" {
  description = "Manifest the controller applies after kubeadm init to install a CNI plugin; empty to bring your own."
  type        = string
  default     = "https://raw.githubusercontent.com/projectcalico/calico/v3.29.1/manifests/calico.yaml"
}

variable "ssh_authorized_keys" {
  description = "SSH public keys for the core user."
  type        = list(string)
  default     = []
}

variable "slipway_ignition" {
  description = "Ignition (spec 3.x JSON) merged into every node to leave reboots to Slipway; empty means butane/snippets/flatcar-slipway.ign of this repository (locksmithd masked, update-engine enabled; update.conf, and so the channel, left to the image)."
  type        = string
  default     = ""
}
