package access

import (
	"fmt"
	"sort"
	"strings"
)

// Principal is someone weaker than a cluster administrator who may write an object that
// liqo-auth reads. Each is acted as, by impersonation with exactly its rules, in the
// integration test TestPrincipalMatrix.
type Principal string

// The principals of the threat model (docs/security.md), weakest first within a kind.
const (
	// NamespaceCreator may create namespaces with any labels (liqo-tenant-<id> and the
	// tenant labels included) and write anything inside the namespaces it creates.
	NamespaceCreator Principal = "namespace creator"
	// SecretWriter may write Secrets in a tenant namespace (data, labels, annotations).
	SecretWriter Principal = "Secret writer in a tenant namespace"
	// TenantWriter may write Tenants in a tenant namespace (spec and metadata).
	TenantWriter Principal = "Tenant writer in a tenant namespace"
	// IdentityWriter may write Identities in a tenant namespace (spec and metadata).
	IdentityWriter Principal = "Identity writer in a tenant namespace"
	// SliceWriter may write ResourceSlices in a tenant namespace (spec and metadata).
	SliceWriter Principal = "ResourceSlice writer in a tenant namespace"
	// RoleWriter may write Roles in a tenant namespace (with rules it holds).
	RoleWriter Principal = "Role writer in a tenant namespace"
	// StatusWriter may write the status of this project's kinds in every namespace (another
	// operator's ServiceAccount).
	StatusWriter Principal = "status writer"
	// TheTenant is the consumer's own identity on its provider (its certificate).
	TheTenant Principal = "the tenant"
	// PeeringUser is a provider's peering user of one consumer, held by that consumer's
	// administrator.
	PeeringUser Principal = "peering user"
	// CSRCreator may create CertificateSigningRequests (bootstrap tokens, kubelets, many
	// operators).
	CSRCreator Principal = "CSR creator"
	// ClusterRoleBinder may create ClusterRoleBindings of ClusterRoles whose rules it holds.
	ClusterRoleBinder Principal = "ClusterRoleBinding writer"
	// LiqoNamespaceWriter may write ConfigMaps and Leases in the Liqo namespace: the
	// administrator or its deputy (a GitOps controller), trusted.
	LiqoNamespaceWriter Principal = "ConfigMap or Lease writer in the Liqo namespace"
)

// Writer is a principal that may write objects of a kind, and what of them.
type Writer struct {
	Principal Principal
	// Writes says which objects and fields, in words.
	Writes string
	// Trusted marks a writer that acts as the administrator: it is not an adversary, and
	// no test acts as it.
	Trusted bool
	// Tests are the integration tests (test/integration) that act as this principal on
	// this kind, besides TestPrincipalMatrix.
	Tests []string
}

// Writers of the kinds, shared by ManagerWatched, CommandReads and the threat model.
var (
	nsCreatorSecrets = Writer{Principal: NamespaceCreator, Writes: "Secrets with any name, labels and data in namespaces it creates (`liqo-tenant-<id>` with the tenant labels, or any other)", Tests: []string{"TestMetricsSeriesComeOnlyFromPeers", "TestManagerCacheKeepsOnlyWhatItOwns"}}
	secretWriter     = Writer{Principal: SecretWriter, Writes: "the nonce, signed-nonce and kubeconfig Secrets of the tenant namespace, and any other there: data, labels, annotations", Tests: []string{"TestH50StrippedNonceCostsOneLiveReadAndGoesWithItsSecret", "TestRevocationProofTrustsTheIdentity", "TestNonceStampsCannotExtendANonce", "TestKubeconfigSecretsAreNeverExecuted", "TestAttack54FullSecretQuotaKeepsTheSignedNonce", "TestAttack56FullSecretQuotaKeepsTheNonce", "TestAttack57CreateOnlyPrincipalClaimsTheFreedNonceSlot"}}
	peeringUserNonce = Writer{Principal: PeeringUser, Writes: "the nonce `liqo-nonce` of its consumer: data key `nonce`, its labels and annotations only (admission policy)", Tests: []string{"TestPeeringUser"}}
	nsCreatorNS      = Writer{Principal: NamespaceCreator, Writes: "namespaces with any labels, `liqo-tenant-<id>` included; the creator annotations only by the API server", Tests: []string{"TestTenantNamespaceDesignatedByItsCreator", "TestLookAlikeNamespaces", "TestAttack6NamespaceCreatorRevivesSeriesOfADeletedTenantNamespace"}}
	nsCreatorRecords = Writer{Principal: NamespaceCreator, Writes: "ConfigMaps labelled as tenant records, outside the Liqo namespace"}
	liqoNSWriter     = Writer{Principal: LiqoNamespaceWriter, Writes: "tenant records (approvals and denials among them), `liqo-auth-config` (whether approval is required), the cluster ID, the manager's Lease: the administrator's decisions", Trusted: true}
	nsCreatorTenants = Writer{Principal: NamespaceCreator, Writes: "Tenants (spec, metadata) in namespaces it creates: copies of a consumer's Tenant with its nonce in many look-alikes at once; a flood of Tenants that are refused", Tests: []string{"TestMetricsSeriesComeOnlyFromPeers", "TestAttack59OneNonceInManyNamespacesAtOnce", "TestAttack59GarbageFloodBesideAnHonestHandshake"}}
	tenantWriter     = Writer{Principal: TenantWriter, Writes: "the Tenants of the tenant namespace: spec (key, CSR, signature, proxy, `tenantCondition`) and metadata", Tests: []string{"TestApprovalCannotBeForged", "TestTenantCarriesTheFinalizerFromItsCreation", "TestAttack52DeletedAsAcceptedWithFinalizerOn",
		"TestAttack60bTenantWriterSwapsTheProxyWhileAuthenticateWaits", "TestAttack60bTenantWriterProxyOutlivesTheConsumersReapply", "TestAttack60bTenantWriterDictatesTheProxyAdvice", "TestAttack60bTenantWriterRemovesTheProxySilently"}}
	peeringUserTenant = Writer{Principal: PeeringUser, Writes: "the Tenant named after its consumer: spec and metadata", Tests: []string{"TestPeeringUserCannotUndoTheAdministrator", "TestApprovalCannotBeForged",
		"TestAttack52StripDeleteRecreateMidReconcile", "TestAttack52PeeringUserAppliesAsLiqoctlWithoutFinalizer", "TestAttack52DeletedWithOrphanPropagation",
		"TestAttack53RecreatedTenantKeepsItsAccess", "TestAttack73PeeringUserStripsTheFinalizerCopyKeepsItsGrant"}}
	statusTenants = Writer{Principal: StatusWriter, Writes: "Tenant status in every namespace (acceptance, `acceptedAt`, conditions, certificate, published server, CA and proxy)", Tests: []string{"TestStatusWriterCannotHijackTheFirstHandshake", "TestStatusWritersCannotAcceptATenant",
		"TestAttack60TenantStatusWriterPublishesAProxy",
		"TestStatusWriterCannotMakeTheProviderIssue", "TestAttack5StatusWriterBackdatesRenewAfter", "TestAttack5StatusWriterInflatesHandshakeMetric",
		"TestAttack6StatusWriterReplaysRenewRequest", "TestAttack6StatusWriterMakesRenewTenantReportAFalseRenewal",
		"TestAttack10StatusWriterMakesRenewTenantSayDrained", "TestAttack10StatusWriterFightsRenewTenantWithinItsTimeout", "TestApprovalCannotBeForged", "TestAttack77TenantStatusWriterNamesTheIdentitysNamespace"}}
	tenantLeaves    = Writer{Principal: TheTenant, Writes: "deletes its own Tenant, by name (leaving: `handshake.Leave`); its spec, status and every other Tenant stay out of its reach", Tests: []string{"TestConsumerLeaves", "TestAttack52DeletedWithOrphanPropagation"}}
	tenantRenews    = Writer{Principal: TheTenant, Writes: "Renews in its tenant namespace: spec and metadata"}
	nsCreatorRenews = Writer{Principal: NamespaceCreator, Writes: "Renews in namespaces it creates"}
	statusRenews    = Writer{Principal: StatusWriter, Writes: "Renew status in every namespace"}
	tenantSlices    = Writer{Principal: TheTenant, Writes: "ResourceSlices in its tenant namespace (the provider's copies): spec and metadata", Tests: []string{"TestSliceUsersAndClusterIDsNeverMeet",
		"TestAttack53SliceDeletedWithOrphanPropagation", "TestAttack53RelabelledSliceHeldAndOrphaned", "TestAttack53RecreatedSliceKeepsItsAccess", "TestAttack53OrphanCleanupSparesTheHonestSlice", "TestAttack73RenamedCopyOutlivesItsTenant",
		"TestAttack74TenantHoldsItsCopyUnauthenticateGoesOn", "TestAttack74TenantHoldsItsCopyLeaveGoesOn", "TestAttack74TenantHoldsItsCopyDeleteResourceSliceGoesOn"}}
	nsCreatorSlices = Writer{Principal: NamespaceCreator, Writes: "ResourceSlices in namespaces it creates, claiming any consumer or provider"}
	sliceWriter     = Writer{Principal: SliceWriter, Writes: "ResourceSlices of a tenant namespace on the consumer: spec and metadata (a request to that provider is this writer's to make)", Tests: []string{"TestH50SliceWriterAloneRefusesTheDefaultWithAWorkableWayOut", "TestConsumerSliceOutsideTenantNamespace",
		"TestRelabelledSliceIsNotForgotten", "TestAttack69SliceWriterRelabelsASliceBeforeUnauthenticate", "TestAttack69SliceWriterRelabelsASliceBeforeLeave", "TestUnauthenticateGoesOnPastASlicesFailedProof", "TestAttack75HeldSliceKeepsNoIdentity",
		"TestSliceNameTakenByTheProvidersOwnRequest", "TestH52UpdateOnlyWriterKeepsCopyPastDeletion", "TestH53SliceWriterForgetsTheCopyProviderWriterRelabels",
		"TestH53SliceWriterAdoptsTheProvidersOwnRequest", "TestH53UpdateOnlyWriterHoldsAndStripsTheCopy", "TestH54CopyMadeButNotRecorded",
		"TestH54UpdateOnlyWriterHasTheProvidersRequestAdoptedThenDeleted", "TestH54SliceWriterMovesItsSliceToAnotherProvider"}}
	statusSlices   = Writer{Principal: StatusWriter, Writes: "ResourceSlice status in every namespace (verdict, resources, certificate, published server and proxy)", Tests: []string{"TestResourceSliceStatusIsNotTrusted", "TestAttack60SliceStatusWriterPublishesAProxy", "TestAttack72ProviderStatusWriterForgesTheSlicesCertificate", "TestH53StatusWriterCannotWriteTheCopyUID"}}
	nsCreatorIDs   = Writer{Principal: NamespaceCreator, Writes: "Identities in namespaces it creates, naming any provider"}
	identityWriter = Writer{Principal: IdentityWriter, Writes: "the Identities of the tenant namespace: spec (server, CA, proxy, certificate, the provider's namespace) and metadata", Tests: []string{"TestH50IdentityWriterBlocksTheProvidersWordWithTheManagersGuess", "TestAdversarialConsumer", "TestAttack60bIdentityWriterRoutesSlicesThroughItsProxy",
		"TestAttack60cIdentityWriterPinsItsProxyAfterUnauthenticate", "TestAttack60cIdentityWriterPinsItsProxyOnAPeeringBeforeThePin",
		"TestAttack61IdentityWriterDecoyPinsItsCA", "TestAttack61bAdvisedCAUnpinLetsAnIdentityWriterChooseTheCA", "TestAttack63IdentityWriterProxiesTheConsumersProofs",
		"TestAttack66IdentityWriterBlocksTheRevocationOfALegacyPeering", "TestAttack66DecoyAfterUnauthenticateAdvisesANewHandshake",
		"TestAttack67IdentityWriterMovesTheSlicesRevocationProof", "TestAttack76IdentityWriterHidesACustomTenantNamespaceFromTheSlicesProof",
		"TestAttack77LeaveAfterIdentityWriterMovedTheNamespace", "TestAttack77ReauthenticatePinsAnUnpinnedNamespace", "TestAttack77FollowingTheRefusalReopensTheMove", "TestAttack77RefusalAdviceReopensF7WithACustomNamespace",
		"TestAttack79NotReadyIdentityDisarmsGenerateTenantsNamespaceCheck", "TestAttack80PeeringOlderThanThePinIsPinned",
		"TestAttack81GenerateTenantTrustsIdentitiesMovedToTheDefault", "TestAttack81PlantedIdentityRepinsAnUnauthenticatedPeering",
		"TestAttack82LegacyPinTakesAHandMadePeeringForThePeerings",
		"TestAttack67IdentityWriterDeletesTheControlPlaneIdentityBeforeASlicesDeletion",
		"TestAttack68IdentityWriterDeletesBothIdentitiesBeforeASlicesDeletion", "TestAttack68IdentityWriterPutsTheControlPlaneCertificateInTheSlicesIdentity",
		"TestAttack68IdentityWriterPutsASlicesCertificateInTheControlPlaneIdentity",
		"TestAttack69IdentityWriterForgesTheSlicesCertificate", "TestAttack69IdentityWriterForgesTheControlPlaneCertificate",
		"TestAttack70IdentityWriterPutsBackTheSlicesOlderCertificate"}}
	statusIDs         = Writer{Principal: StatusWriter, Writes: "Identity status in every namespace (conditions, certificate)"}
	nsCreatorBindings = Writer{Principal: NamespaceCreator, Writes: "RoleBindings of the Roles it holds, in namespaces it creates, naming any user or group (`<C>`, `liqo.io`)"}
	clusterRoleBinder = Writer{Principal: ClusterRoleBinder, Writes: "ClusterRoleBindings of ClusterRoles it holds, with any name, labels (a peering user's included) and subjects"}
	nsCreatorRoles    = Writer{Principal: NamespaceCreator, Writes: "Roles labelled as this project's, in namespaces it creates"}
	roleWriter        = Writer{Principal: RoleWriter, Writes: "Roles of the tenant namespace labelled as this project's, named like a slice's", Tests: []string{"TestAttack53RoleWriterPlantsASliceRole"}}
	liqoNSPeerings    = Writer{Principal: LiqoNamespaceWriter, Writes: "Peerings and their bootstrap Secrets in the Liqo namespace: the administrator's declarations (a Peering elsewhere is never read)", Trusted: true}
	statusPeerings    = Writer{Principal: StatusWriter, Writes: "Peering status in every namespace (state, provider, bootstrap, conditions)", Tests: []string{"TestPeeringStatusWriterCannotChooseWhatIsLeft"}}
	// A peering user retiring itself (handshake.RetirePeeringUser): deletes only, by name.
	peeringUserBindings = Writer{Principal: PeeringUser, Writes: "deletes its own RoleBindings `liqo-peering-user-<C>` (tenant namespace of C, Liqo namespace), by name only: retiring itself", Tests: []string{"TestPeeringUserRetires"}}
	peeringUserCRB      = Writer{Principal: PeeringUser, Writes: "deletes its own ClusterRoleBinding `liqo-peering-user-<C>`, by name only: retiring itself", Tests: []string{"TestPeeringUserRetires"}}
	peeringUserRoles    = Writer{Principal: PeeringUser, Writes: "deletes Roles named `liqo-peering-user-<C>` (its own, once unbound), by name, and only in the tenant namespace of C and the Liqo namespace (admission policy `liqo-auth-peering-user-deletes`): retiring itself", Tests: []string{"TestPeeringUserRetires", "TestAttack35bPeeringUserDeletesAnotherNamespacesRole"}}
	csrCreator          = Writer{Principal: CSRCreator, Writes: "CertificateSigningRequests with any name, labels (this project's, a Tenant's UID) and request; never `spec.username`", Tests: []string{"TestCSRSquattingIsNeverApproved"}}
)

// CommandRead is an object a liqoctl command reads and decides or prints from.
type CommandRead struct {
	// Command is the liqoctl command line that reads it.
	Command string
	// Group and Resource name the kind, as in Watched.
	Group, Resource string
	// Where it reads them.
	Where string
	// Writers are those who may write what it reads.
	Writers []Writer
}

// CommandReads are the objects liqoctl info, verify and unauthenticate --remote-cluster-id
// read (what they print, and what the last deletes), and the Tenant the Identity is made
// from (authenticate, generate identity).
func CommandReads() []CommandRead {
	const g = "authentication.liqo.io"
	return []CommandRead{
		{Command: "info", Group: g, Resource: "tenants", Where: "every namespace", Writers: []Writer{nsCreatorTenants, tenantWriter, peeringUserTenant, statusTenants, tenantLeaves}},
		{Command: "info", Group: g, Resource: "identities", Where: "every namespace", Writers: []Writer{nsCreatorIDs, identityWriter, statusIDs}},
		{Command: "info", Group: g, Resource: "resourceslices", Where: "every namespace", Writers: []Writer{tenantSlices, nsCreatorSlices, sliceWriter, statusSlices}},
		{Command: "info", Group: "", Resource: "secrets", Where: "every namespace, labelled " + "liqo.io/remote-cluster-id", Writers: []Writer{nsCreatorSecrets, secretWriter, peeringUserNonce}},
		{Command: "info", Group: "", Resource: "configmaps", Where: "tenant records (peering users and approvals included) and `liqo-auth-config` in the Liqo namespace", Writers: []Writer{liqoNSWriter}},
		{Command: "info", Group: "coordination.k8s.io", Resource: "leases", Where: "the manager's Lease in the Liqo namespace", Writers: []Writer{liqoNSWriter}},
		{Command: "info", Group: "rbac.authorization.k8s.io", Resource: "rolebindings", Where: "what a recorded peering user may still do (SubjectAccessReviews): retired or not", Writers: []Writer{nsCreatorBindings, peeringUserBindings}},
		{Command: "info", Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings", Where: "what a recorded peering user may still do (SubjectAccessReviews): retired or not", Writers: []Writer{clusterRoleBinder, peeringUserCRB}},
		{Command: "verify", Group: g, Resource: "identities", Where: "every namespace, then the tenant namespace by name", Writers: []Writer{nsCreatorIDs, identityWriter, statusIDs}},
		{Command: "verify", Group: "", Resource: "configmaps", Where: "tenant records in the Liqo namespace", Writers: []Writer{liqoNSWriter}},
		{Command: "authenticate, generate identity", Group: g, Resource: "tenants", Where: "the recorded tenant namespace, by name: the Identity is made from its status (server, CA, certificate, proxy)", Writers: []Writer{tenantWriter, peeringUserTenant, statusTenants}},
		{Command: "approve tenant, deny tenant", Group: g, Resource: "tenants", Where: "the tenant namespace, by name: the key the provider's seal names", Writers: []Writer{tenantWriter, peeringUserTenant, statusTenants}},
		{Command: "approve tenant, deny tenant", Group: "", Resource: "configmaps", Where: "the tenant record (the certificates a consumer holds, before a denial)", Writers: []Writer{liqoNSWriter}},
		{Command: "unauthenticate --remote-cluster-id", Group: "", Resource: "namespaces", Where: "the recorded tenant namespace, else `liqo-tenant-<id>`", Writers: []Writer{nsCreatorNS}},
		{Command: "unauthenticate --remote-cluster-id", Group: g, Resource: "identities", Where: "the tenant namespace, by name", Writers: []Writer{identityWriter, statusIDs}},
		{Command: "unauthenticate --remote-cluster-id", Group: g, Resource: "tenants", Where: "the tenant namespace, by name", Writers: []Writer{tenantWriter, peeringUserTenant, statusTenants, tenantLeaves}},
		{Command: "unauthenticate --remote-cluster-id", Group: g, Resource: "resourceslices", Where: "the tenant namespace", Writers: []Writer{tenantSlices, sliceWriter, statusSlices}},
		{Command: "unauthenticate, unauthenticate --leave", Group: g, Resource: "resourceslices", Where: "the provider's tenant namespace: every slice there but the provider's copies given to it, whatever its labels", Writers: []Writer{sliceWriter, statusSlices}},
		{Command: "generate tenant", Group: g, Resource: "identities", Where: "the tenant namespace, every Identity and whether a ResourceSlice is there, where no tenant namespace on the provider is pinned: any refuses the default without --remote-tenant-namespace; with it, an accepted control-plane Identity naming another refuses it; none chooses one", Writers: []Writer{identityWriter, statusIDs}},
		{Command: "generate tenant", Group: g, Resource: "resourceslices", Where: "the tenant namespace, whether any is there, where no tenant namespace on the provider is pinned: one refuses the default without --remote-tenant-namespace", Writers: []Writer{sliceWriter}},
		{Command: "delete resourceslice, unauthenticate --delete-resourceslices", Group: g, Resource: "identities", Where: "the slice's Identity, by name: the certificate its revocation is proven with, taken only when of the slice's user and this cluster's key, issued by the pinned CA", Writers: []Writer{identityWriter, statusIDs}},
		{Command: "delete resourceslice, unauthenticate --delete-resourceslices", Group: g, Resource: "resourceslices", Where: "the slice, by name: its status's certificate where its Identity holds none of the slice's, and whether one was issued", Writers: []Writer{sliceWriter, statusSlices}},
	}
}

// Threat is one row of the threat model: a principal, what it may write of one kind, who
// reads it, and the tests that act as that principal.
type Threat struct {
	Principal Principal
	Resource  string
	Writes    string
	ReadBy    []string
	Trusted   bool
	Tests     []string
}

// MatrixTest is the integration test that acts as every untrusted writer of every kind in
// ManagerWatched and CommandReads.
const MatrixTest = "TestPrincipalMatrix"

// ThreatModel is the threat model of docs/security.md, derived from ManagerWatched and
// CommandReads: one row per principal and kind, in the order of the tables.
func ThreatModel() []Threat {
	var out []Threat
	at := map[string]int{}
	add := func(w Writer, resource, reader string) {
		key := string(w.Principal) + "\x00" + resource
		i, ok := at[key]
		if !ok {
			i = len(out)
			at[key] = i
			th := Threat{Principal: w.Principal, Resource: resource, Writes: w.Writes, Trusted: w.Trusted}
			if !w.Trusted {
				th.Tests = append([]string{MatrixTest}, w.Tests...)
			}
			out = append(out, th)
		}
		for _, r := range strings.Split(reader, ", ") {
			if r != "" && !contains(out[i].ReadBy, r) {
				out[i].ReadBy = append(out[i].ReadBy, r)
			}
		}
	}
	for _, w := range ManagerWatched() {
		for _, wr := range w.Writers {
			add(wr, w.Resource, w.ReadBy)
		}
	}
	for _, r := range CommandReads() {
		for _, wr := range r.Writers {
			add(wr, r.Resource, "liqoctl "+r.Command)
		}
	}
	return out
}

// principals are the principals in the order the threat model lists them.
var principals = []Principal{NamespaceCreator, SecretWriter, TenantWriter, IdentityWriter, SliceWriter, RoleWriter,
	StatusWriter, TheTenant, PeeringUser, CSRCreator, ClusterRoleBinder, LiqoNamespaceWriter}

func rank(p Principal) int {
	for i, x := range principals {
		if x == p {
			return i
		}
	}
	return len(principals)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ThreatModelTable renders ThreatModel as the Markdown table of docs/security.md.
func ThreatModelTable() string {
	var b strings.Builder
	b.WriteString("| principal | what it may write | who reads it | the test that acts as it |\n|---|---|---|---|\n")
	rows := ThreatModel()
	sort.SliceStable(rows, func(i, j int) bool { return rank(rows[i].Principal) < rank(rows[j].Principal) })
	for _, r := range rows {
		tests := "trusted: acts as the administrator, out of scope"
		if !r.Trusted {
			quoted := make([]string, len(r.Tests))
			for i, t := range r.Tests {
				quoted[i] = "`" + t + "`"
			}
			tests = strings.Join(quoted, ", ")
		}
		fmt.Fprintf(&b, "| %s | **%s**: %s | %s | %s |\n", r.Principal, r.Resource, r.Writes, strings.Join(r.ReadBy, ", "), tests)
	}
	return b.String()
}
