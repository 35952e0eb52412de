variable "libvirt_uri" {
  description = "libvirt connection."
  type        = string
  default     = "qemu:///system"
}

variable "cluster_name" {
  type    = string
  default = "slipway"
}

variable "flatcar_image" {
  description = "Path or URL of flatcar_production_qemu_image.img."
  type        = string
}

variable "worker_count" {
  type    = number
  default = 2
}

variable "domain_type" {
  description = "\"kvm\", or \"qemu\" without hardware virtualization."
  type        = string
  default     = "kvm"
}

variable "bootstrap_token" {
  type      = string
  sensitive = true
}

variable "ca_cert_pem" {
  type = string
}

variable "ca_key_pem" {
  type      = string
  sensitive = true
}

variable "admin_cert_pem" {
  type = string
}

variable "admin_key_pem" {
  type      = string
  sensitive = true
}
