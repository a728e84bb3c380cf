// Reads Kubernetes objects as JSON (one object, or a List) on stdin and prints one JSON line per
// object: `kstatus` prints kstatus's Compute (Current, InProgress, Failed...) as Flux's health
// checks compute it; `argocd-health LUA_FILE` runs an Argo CD health script under gopher-lua as
// Argo CD does (the object as the global `obj`) and prints the status and message it returns.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kjson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type verdict struct {
	Name    string `json:"name"`
	Status  string `json:"status"`
	Message string `json:"message"`
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: gitops-check kstatus | argocd-health LUA_FILE < objects.json")
	}
	data, err := io.ReadAll(io.LimitReader(os.Stdin, 64<<20))
	if err != nil {
		fail(err.Error())
	}
	var top map[string]interface{}
	// As the API machinery decodes objects: whole numbers as int64 (kstatus reads generations so).
	if err := kjson.Unmarshal(data, &top); err != nil {
		fail("stdin is not a JSON object: " + err.Error())
	}
	objects := []map[string]interface{}{top}
	if items, ok := top["items"].([]interface{}); ok {
		objects = nil
		for _, item := range items {
			objects = append(objects, item.(map[string]interface{}))
		}
	}
	out := json.NewEncoder(os.Stdout)
	for _, object := range objects {
		u := &unstructured.Unstructured{Object: object}
		var v verdict
		switch os.Args[1] {
		case "kstatus":
			result, err := status.Compute(u)
			if err != nil {
				fail(err.Error())
			}
			v = verdict{Status: result.Status.String(), Message: result.Message}
		case "argocd-health":
			if len(os.Args) != 3 {
				fail("argocd-health needs the Lua file")
			}
			v = argocdHealth(os.Args[2], object)
		default:
			fail("unknown mode " + os.Args[1])
		}
		v.Name = u.GetName()
		if err := out.Encode(v); err != nil {
			fail(err.Error())
		}
	}
}

// As Argo CD's lua.VM: the object converted to a Lua table as global `obj`, the script's
// returned table read for `status` and `message`.
func argocdHealth(file string, object map[string]interface{}) verdict {
	state := lua.NewState(lua.Options{SkipOpenLibs: false})
	defer state.Close()
	state.SetGlobal("obj", toLua(state, object))
	if err := state.DoFile(file); err != nil {
		fail(err.Error())
	}
	returned, ok := state.Get(-1).(*lua.LTable)
	if !ok {
		fail("the health script returned no table")
	}
	return verdict{Status: lua.LVAsString(returned.RawGetString("status")), Message: lua.LVAsString(returned.RawGetString("message"))}
}

func toLua(state *lua.LState, value interface{}) lua.LValue {
	switch v := value.(type) {
	case map[string]interface{}:
		table := state.NewTable()
		for key, item := range v {
			table.RawSetString(key, toLua(state, item))
		}
		return table
	case []interface{}:
		table := state.NewTable()
		for _, item := range v {
			table.Append(toLua(state, item))
		}
		return table
	case string:
		return lua.LString(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case bool:
		return lua.LBool(v)
	case nil:
		return lua.LNil
	}
	return lua.LString(fmt.Sprint(value))
}

func fail(message string) {
	fmt.Fprintln(os.Stderr, "gitops-check:", message)
	os.Exit(2)
}
