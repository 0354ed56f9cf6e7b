package metawrite

import (
	"net/url"
	"reflect"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// The options a write sends are the query the API's parameter codec makes of the same
// CreateOptions or UpdateOptions, for every field either has.
func TestOptionsAreTheCodecsParameters(t *testing.T) {
	// A field added to either struct would go unsent: name them all here.
	for _, o := range []any{metav1.CreateOptions{}, metav1.UpdateOptions{}} {
		var fields []string
		for f := range reflect.TypeOf(o).Fields() {
			fields = append(fields, f.Name)
		}
		if want := []string{"TypeMeta", "DryRun", "FieldManager", "FieldValidation"}; !slices.Equal(fields, want) {
			t.Errorf("%T has the fields %v; options sends %v", o, fields, want[1:])
		}
	}

	codec := runtime.NewParameterCodec(scheme)
	queryOf := func(set func(*rest.Request) *rest.Request) url.Values {
		base, _ := url.Parse("https://api.example")
		return set(rest.NewRequestWithClient(base, "", rest.ClientContentConfig{}, nil)).URL().Query()
	}
	for _, o := range []options{
		{},
		{fieldManager: "cmsync"},
		{dryRun: []string{metav1.DryRunAll}},
		{dryRun: []string{metav1.DryRunAll}, fieldManager: "m", fieldValidation: metav1.FieldValidationStrict},
		{fieldValidation: metav1.FieldValidationIgnore},
	} {
		create := &metav1.CreateOptions{DryRun: o.dryRun, FieldManager: o.fieldManager, FieldValidation: o.fieldValidation}
		update := &metav1.UpdateOptions{DryRun: o.dryRun, FieldManager: o.fieldManager, FieldValidation: o.fieldValidation}
		got := queryOf(o.setOn)
		for _, opts := range []runtime.Object{create, update} {
			want := queryOf(func(r *rest.Request) *rest.Request {
				return r.SpecificallyVersionedParams(opts, codec, schema.GroupVersion{Version: "v1"})
			})
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%+v: query %v, the codec's of %T %v", o, got, opts, want)
			}
		}
	}
}
