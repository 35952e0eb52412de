package nodeconfig

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// accounts resolves the user and group names of a config to ids the way Ignition does: in the
// node's own account database (Ignition looks them up inside its target root), never this
// process's — the update-agent's container or the admin's workstation know other users. Flatcar
// keeps system accounts in /usr/share/baselayout (nsswitch "usrfiles") and the admin's in /etc;
// /etc is read first, as glibc does.
type accounts struct {
	root *rootFS
	seen map[string]int // "passwd:name" or "group:name" -> id, read once per plan
}

var accountFiles = map[string][]string{
	"passwd": {"/etc/passwd", "/usr/share/baselayout/passwd"},
	"group":  {"/etc/group", "/usr/share/baselayout/group"},
}

// id looks name up in db ("passwd" or "group"): the third field of its line.
func (a *accounts) id(db, name string) (int, error) {
	if id, ok := a.seen[db+":"+name]; ok {
		return id, nil
	}
	var looked []string
	for _, p := range accountFiles[db] {
		rel, err := a.root.resolveAll(p)
		if err != nil {
			return 0, err
		}
		data, err := os.ReadFile(a.root.host(rel))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return 0, err
		}
		looked = append(looked, p)
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			f := strings.Split(sc.Text(), ":")
			if len(f) < 3 || f[0] != name {
				continue
			}
			id, err := strconv.Atoi(f[2])
			if err != nil || id < 0 {
				return 0, fmt.Errorf("%s: %q has id %q", p, name, f[2])
			}
			if a.seen == nil {
				a.seen = map[string]int{}
			}
			a.seen[db+":"+name] = id
			return id, nil
		}
	}
	what := map[string]string{"passwd": "user", "group": "group"}[db]
	if len(looked) == 0 {
		return 0, fmt.Errorf("no %s %q: the root has none of %s", what, name, strings.Join(accountFiles[db], ", "))
	}
	return 0, fmt.Errorf("no %s %q in the root's %s (users and groups are not created here: that is first boot's work)", what, name, strings.Join(looked, ", "))
}

// owner turns a node's user and group (id or name; Ignition refuses both) into ids; nil where the
// config leaves it unset.
func (a *accounts) owner(uid *int, user *string, gid *int, group *string) (u, g *int, err error) {
	pick := func(id *int, name *string, db string) (*int, error) {
		if id != nil {
			v := *id
			return &v, nil
		}
		if name != nil && *name != "" {
			v, err := a.id(db, *name)
			if err != nil {
				return nil, err
			}
			return &v, nil
		}
		return nil, nil
	}
	if u, err = pick(uid, user, "passwd"); err != nil {
		return nil, nil, err
	}
	if g, err = pick(gid, group, "group"); err != nil {
		return nil, nil, err
	}
	return u, g, nil
}
