package controlplane

import (
	"context"
	"fmt"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Throttle is an API Priority and Fairness configuration that throttles some users
// hard: a priority level of one seat that neither lends nor borrows, with short queues,
// and a FlowSchema of the same name sending the users' requests matched by the rules
// there, one flow per user. Beyond what the seat and the queues hold, the API server
// answers 429.
type Throttle struct {
	Name        string
	Users       []string
	Queues      int32
	HandSize    int32
	QueueLength int32
	Rules       []flowcontrolv1.ResourcePolicyRule
	NonResource []flowcontrolv1.NonResourcePolicyRule
}

// Apply creates the configuration and waits until the API server uses it.
func (th Throttle) Apply(ctx context.Context, cs kubernetes.Interface) error {
	fc := cs.FlowcontrolV1()
	_, err := fc.PriorityLevelConfigurations().Create(ctx, &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: th.Name},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: ptr.To[int32](1),
				LendablePercent:          ptr.To[int32](0),
				BorrowingLimitPercent:    ptr.To[int32](0),
				LimitResponse: flowcontrolv1.LimitResponse{
					Type:    flowcontrolv1.LimitResponseTypeQueue,
					Queuing: &flowcontrolv1.QueuingConfiguration{Queues: th.Queues, HandSize: th.HandSize, QueueLengthLimit: th.QueueLength},
				},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating priority level %s: %w", th.Name, err)
	}
	subjects := make([]flowcontrolv1.Subject, 0, len(th.Users))
	for _, user := range th.Users {
		subjects = append(subjects, flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: user}})
	}
	_, err = fc.FlowSchemas().Create(ctx, &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: th.Name},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: th.Name},
			MatchingPrecedence:         100,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{
				{Subjects: subjects, ResourceRules: th.Rules, NonResourceRules: th.NonResource},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating flow schema %s: %w", th.Name, err)
	}
	for {
		fs, err := fc.FlowSchemas().Get(ctx, th.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range fs.Status.Conditions {
			if cond.Type == flowcontrolv1.FlowSchemaConditionDangling && cond.Status == flowcontrolv1.ConditionFalse {
				time.Sleep(time.Second) // the configuration reaches the filter shortly after
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Remove deletes the configuration; what is already gone is no error.
func (th Throttle) Remove(ctx context.Context, cs kubernetes.Interface) error {
	fc := cs.FlowcontrolV1()
	if err := fc.FlowSchemas().Delete(ctx, th.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err := fc.PriorityLevelConfigurations().Delete(ctx, th.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	time.Sleep(time.Second)
	return nil
}
