// Package argohealth runs an Argo CD resource health check (health.lua) the way Argo CD does: with
// gopher-lua, the object as the global obj, the script's returned table read as status and message.
// Tests use it on the shipped check with Argo CD's own fixture layout (health_test.yaml).
package argohealth

import (
	"encoding/json"
	"fmt"

	lua "github.com/yuin/gopher-lua"
)

// Evaluate runs script with obj and returns the health status and message it answers.
func Evaluate(script []byte, obj map[string]any) (status, message string, err error) {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	// The libraries Argo CD opens for health scripts.
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	// Through JSON, as Argo CD hands the object over: numbers are floats, nulls are absent.
	b, err := json.Marshal(obj)
	if err != nil {
		return "", "", err
	}
	var plain any
	if err := json.Unmarshal(b, &plain); err != nil {
		return "", "", err
	}
	L.SetGlobal("obj", toLua(L, plain))
	fn, err := L.LoadString(string(script))
	if err != nil {
		return "", "", err
	}
	L.Push(fn)
	if err := L.PCall(0, 1, nil); err != nil {
		return "", "", err
	}
	t, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		return "", "", fmt.Errorf("the script returned %s, not a table", L.Get(-1).Type())
	}
	return lua.LVAsString(t.RawGetString("status")), lua.LVAsString(t.RawGetString("message")), nil
}

func toLua(L *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, e := range x {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, e := range x {
			t.Append(toLua(L, e))
		}
		return t
	case string:
		return lua.LString(x)
	case float64:
		return lua.LNumber(x)
	case bool:
		return lua.LBool(x)
	}
	return lua.LNil
}
