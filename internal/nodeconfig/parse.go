package nodeconfig

import (
	"fmt"
	"strings"

	// The newest stable spec of the Ignition library pinned in go.mod (v2.26.0: 3.6.0). Its
	// ParseCompatibleVersion parses 3.0.0 to 3.6.0 and translates older versions up with
	// Ignition's own translators, as Ignition does with the configs it fetches; experimental
	// versions are refused. (config.Parse would also take 3.7.0-experimental.) When Ignition
	// stabilizes a newer spec, move this import to it.
	ign "github.com/coreos/ignition/v2/config/v3_6"
	"github.com/coreos/ignition/v2/config/v3_6/types"
)

// Parse reads an Ignition config of any stable spec 3.x and refuses, before anything on the node
// changes, what a running node cannot take or what cannot be applied idempotently: users and
// groups (passwd), disks, RAID, filesystems and LUKS, kernel arguments, merged or replaced configs,
// appends, remote contents, and unit or drop-in names that are not plain file names.
//
// warnings are Ignition's own, for the user to read: among them, that a spec older than 3.6.0
// ignores setuid/setgid/sticky bits — its translation to 3.6 drops them, so Ignition would not
// set them at first boot and neither is this.
func Parse(raw []byte) (cfg types.Config, warnings []string, err error) {
	cfg, rpt, err := ign.ParseCompatibleVersion(raw)
	if err != nil {
		if len(rpt.Entries) > 0 {
			return cfg, nil, fmt.Errorf("not a valid Ignition config (stable spec 3.0.0 to %s): %v\n%s", types.MaxVersion, err, rpt)
		}
		return cfg, nil, fmt.Errorf("not a valid Ignition config (stable spec 3.0.0 to %s): %v", types.MaxVersion, err)
	}
	for _, e := range rpt.Entries {
		warnings = append(warnings, e.String())
	}
	var problems []string
	add := func(cond bool, what string) {
		if cond {
			problems = append(problems, what)
		}
	}
	add(len(cfg.Ignition.Config.Merge) > 0 || cfg.Ignition.Config.Replace.Source != nil,
		"ignition.config merge/replace (flatten the config first, e.g. with butane --files-dir)")
	add(len(cfg.Passwd.Users) > 0 || len(cfg.Passwd.Groups) > 0, "passwd users/groups (creating accounts is first boot's work)")
	add(len(cfg.Storage.Disks) > 0 || len(cfg.Storage.Filesystems) > 0 || len(cfg.Storage.Raid) > 0 || len(cfg.Storage.Luks) > 0,
		"storage disks/raid/filesystems/luks (they would repartition or reformat a running node)")
	add(len(cfg.KernelArguments.ShouldExist) > 0 || len(cfg.KernelArguments.ShouldNotExist) > 0,
		"kernelArguments (they need the boot Ignition runs in)")
	for _, f := range cfg.Storage.Files {
		add(len(f.Append) > 0, "storage.files["+f.Path+"].append (appending again on every run is not idempotent)")
		if s := f.Contents.Source; s != nil && *s != "" && !strings.HasPrefix(*s, "data:") {
			problems = append(problems, fmt.Sprintf("storage.files[%s].contents from %q: only inline (data:) contents are applied to a running node, which should not fetch what it then writes as root; put them inline (Butane's local: does)", f.Path, *s))
		}
	}
	for _, u := range cfg.Systemd.Units {
		if err := unitName(u.Name); err != nil {
			problems = append(problems, err.Error())
		}
		for _, d := range u.Dropins {
			if err := fileName(d.Name); err != nil {
				problems = append(problems, fmt.Sprintf("systemd.units[%s].dropins: %v", u.Name, err))
			}
		}
	}
	if len(problems) > 0 {
		return cfg, warnings, fmt.Errorf("the config has what cannot be applied to a running node, nothing applied: %s", strings.Join(problems, "; "))
	}
	return cfg, warnings, nil
}

// fileName accepts what names one file in one directory. Ignition checks only a drop-in's
// suffix (.conf), so "../../x.conf" passes its validation; here it would leave the unit's
// drop-in directory.
func fileName(n string) error {
	if n == "" || n == "." || n == ".." || strings.ContainsAny(n, "/\x00") || len(n) > 255 {
		return fmt.Errorf("name %q is not a plain file name", n)
	}
	return nil
}

// unitName accepts what systemd accepts as a unit name (unit_name_is_valid: at most 255 bytes of
// [A-Za-z0-9:_.\-@], a non-empty name before the type suffix; Ignition has checked the suffix).
// Such a name is a plain file name in /etc/systemd/system, and systemd's D-Bus API will not refuse
// it halfway through a plan.
func unitName(n string) error {
	if err := fileName(n); err != nil {
		return fmt.Errorf("systemd unit %w", err)
	}
	dot := strings.LastIndexByte(n, '.')
	if dot <= 0 {
		return fmt.Errorf("systemd unit name %q has nothing before its suffix", n)
	}
	for _, c := range n {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(":_.\\-@", c)) {
			return fmt.Errorf("systemd unit name %q has %q, which systemd does not allow in a unit name", n, c)
		}
	}
	return nil
}
