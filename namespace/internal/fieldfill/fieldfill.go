// Package fieldfill fills a value for codec tests: the entry codec's and
// the lock history's tests set every field through it, so a field added
// to a type a hand-written codec covers shows up in the encoding and fails
// the test until the codec writes it.
package fieldfill

import "reflect"

// Value sets every field reachable from v to a non-zero value (a
// slice gets one element, a pointer a value), so that a field added to
// Command, Member, ACLRule or Limits shows up in the encoding.
func Value(v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			Value(v.Field(i), depth)
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		Value(v.Elem(), depth)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Struct && depth > 0 {
			return // a Command's Ops: one level
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		Value(v.Index(0), depth+1)
	case reflect.String:
		v.SetString("s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(-40000)
	case reflect.Uint8, reflect.Uint64:
		v.SetUint(200)
	default:
		panic("fieldfill: add " + v.Kind().String())
	}
}
