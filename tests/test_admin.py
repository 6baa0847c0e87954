"""The admin through Django's test client: read-only rows, pretty JSON, cheap search and
filters, the dead events view grouped by error, and its permission-guarded actions."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
from html import unescape
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from eventferry_django import admin as outbox_admin
from eventferry_django import admin_actions
from eventferry_django.models import DeadOutboxEvent, InboxMessage, OutboxEvent, Status
from eventferry_django.store.in_flight_journal import InFlightJournal

pytestmark = pytest.mark.django_db

EVENTS = reverse("admin:eventferry_django_outboxevent_changelist")
DEAD = reverse("admin:eventferry_django_deadoutboxevent_changelist")

_numbers = itertools.count(1)

#: Users are created logged in once: a NULL last_login is the one value the T-SQL
#: endpoint cannot store in its datetimeoffset column under USE_TZ (engine_gaps:
#: datetimeoffset-null); SQL Server stores either, and no test here looks at it.
LAST_LOGIN = timezone.now


def make_event(
    status: Status = Status.DEAD,
    *,
    error: str | None = "broker down",
    topic: str = "orders.created",
    aggregate_id: str | None = None,
    payload: str = '{"total": 10}',
    processed_ago: dt.timedelta | None = dt.timedelta(minutes=5),
) -> OutboxEvent:
    n = next(_numbers)
    now = timezone.now()
    return OutboxEvent.objects.create(
        message_id=f"msg-{n:06d}",
        topic=topic,
        aggregate_type="order",
        aggregate_id=aggregate_id or f"order-{n}",
        payload=payload,
        status=status,
        attempts=5 if status == Status.DEAD else 0,
        last_error=error if status in (Status.DEAD, Status.FAILED) else None,
        processed_at=now - processed_ago if processed_ago is not None else None,
    )


def staff_user(username: str, *codenames: str) -> User:
    """A staff user (not a superuser) holding exactly these eventferry permissions."""
    user = User.objects.create_user(username, password="secret-pass-123", is_staff=True,
                                    last_login=LAST_LOGIN())
    perms = Permission.objects.filter(content_type__app_label="eventferry_django",
                                      codename__in=codenames)
    assert sorted(p.codename for p in perms) == sorted(codenames)
    user.user_permissions.set(perms)
    return user


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def change_url(model: str, pk: int) -> str:
    return reverse(f"admin:eventferry_django_{model}_change", args=[pk])


def action_names(response: Any) -> set[str]:
    form = response.context["action_form"]
    if form is None:
        return set()
    return {name for name, _ in form.fields["action"].choices if name}


def post_action(
    client: Client, action: str, ids: list[int], *, confirm: bool, url: str = DEAD
) -> Any:
    data: dict[str, Any] = {"action": action, "_selected_action": [str(i) for i in ids]}
    if confirm:
        data["post"] = "yes"
    else:
        data["index"] = "0"  # as the changelist's own action bar posts it
    return client.post(url, data)


def flashed(response: Any) -> list[tuple[str, str]]:
    return [(m.level_tag, str(m)) for m in get_messages(response.wsgi_request)]


# --- The events entry: read-only, pretty JSON, cheap search ---------------------------------

def test_payload_and_headers_are_pretty_printed_and_escaped() -> None:
    text = '{"note": "<script>alert(1)</script>", "price": 1.5, "name": "café"}'
    event = make_event(Status.PENDING, payload=text)
    OutboxEvent.objects.filter(pk=event.pk).update(headers='{"x-tenant":"acme"}')
    client = client_for(staff_user("viewer", "view_outboxevent"))

    html = client.get(change_url("outboxevent", event.pk)).content.decode()

    # PostgreSQL's jsonb keeps keys in its own order, so compare the parsed blocks.
    payload, headers = re.findall(r'<pre class="eventferry-json">(.*?)</pre>', html, re.S)
    assert json.loads(unescape(payload)) == {"note": "<script>alert(1)</script>", "price": 1.5,
                                             "name": "café"}
    assert '\n  &quot;note&quot;: &quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot;' in payload
    assert "café" in payload  # readable, not \u00e9
    assert headers == '{\n  &quot;x-tenant&quot;: &quot;acme&quot;\n}'
    assert "<script>alert(1)" not in html


def test_the_schema_version_is_shown_with_the_message() -> None:
    event = make_event(Status.PENDING)
    OutboxEvent.objects.filter(pk=event.pk).update(schema_version="2026-11")
    client = client_for(staff_user("viewer", "view_outboxevent"))

    html = client.get(change_url("outboxevent", event.pk)).content.decode()

    field = html.split("field-schema_version", 1)[1].split("field-payload_json", 1)[0]
    assert "Schema version" in field and "2026-11" in field


def test_text_that_is_not_json_is_shown_escaped_as_is() -> None:
    shown = outbox_admin.pretty_json("<not json>")
    assert shown == '<pre class="eventferry-json">&lt;not json&gt;</pre>'


def test_rows_are_read_only_even_for_a_superuser() -> None:
    event = make_event(Status.PENDING)
    root = User.objects.create_superuser("root", password="secret-pass-123",
                                         last_login=LAST_LOGIN())
    client = client_for(root)

    assert client.get(reverse("admin:eventferry_django_outboxevent_add")).status_code == 403
    assert client.get(reverse("admin:eventferry_django_deadoutboxevent_add")).status_code == 403
    page = client.get(change_url("outboxevent", event.pk))
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()
    assert 'name="_continue"' not in page.content.decode()
    # Posting a change anyway is refused and changes nothing.
    response = client.post(change_url("outboxevent", event.pk), {"status": Status.DONE})
    assert response.status_code == 403
    event.refresh_from_db()
    assert event.status == Status.PENDING
    # No delete of any row from the events entry, not even for a superuser.
    assert client.get(reverse("admin:eventferry_django_outboxevent_delete",
                              args=[event.pk])).status_code == 403
    listing = client.get(EVENTS)
    assert action_names(listing) == set()
    assert reverse("admin:eventferry_django_outboxevent_add") not in listing.content.decode()


def test_view_permission_is_enough_to_read() -> None:
    event = make_event(Status.DONE, error=None)
    client = client_for(staff_user("viewer", "view_outboxevent"))
    assert client.get(EVENTS).status_code == 200
    assert client.get(change_url("outboxevent", event.pk)).status_code == 200
    # The dead entry has permissions of its own.
    assert client.get(DEAD).status_code == 403


def test_listing_shows_the_columns_and_newest_first() -> None:
    older = make_event(Status.DONE, error=None, aggregate_id="cust-1")
    newer = make_event(Status.PENDING, aggregate_id="cust-2", processed_ago=None)
    client = client_for(staff_user("viewer", "view_outboxevent"))

    response = client.get(EVENTS)

    assert [e.pk for e in response.context["cl"].result_list] == [newer.pk, older.pk]
    html = response.content.decode()
    assert "order/cust-1" in html
    for heading in ("Status", "Topic", "Aggregate", "Attempts", "Age", "Processed"):
        assert f">{heading}<" in html, heading
    assert "5\xa0minutes ago" in html or "5 minutes ago" in html


def test_search_is_by_exact_message_id_or_aggregate_id_prefix() -> None:
    target = make_event(Status.DONE, error=None, aggregate_id="cust-77")
    make_event(Status.DONE, error=None, aggregate_id="other-1")
    client = client_for(staff_user("viewer", "view_outboxevent"))

    def found(term: str) -> list[int]:
        with CaptureQueriesContext(connection) as queries:
            response = client.get(EVENTS, {"q": term})
        # Never a contains-search: no LIKE with a leading wildcard on any column.
        assert not any(f"%{term}" in q["sql"] for q in queries.captured_queries)
        return [e.pk for e in response.context["cl"].result_list]

    assert found(target.message_id) == [target.pk]
    assert found(target.message_id[:-1]) == []  # exact, not a prefix
    assert found("cust-") == [target.pk]
    assert found("ust-77") == []  # prefix, not contains
    assert found("total") == []  # the payload is never searched


def test_topic_filter_is_a_text_box_without_select_distinct() -> None:
    make_event(Status.DONE, error=None, topic="orders.created")
    shipped = make_event(Status.DONE, error=None, topic="orders.shipped")
    client = client_for(staff_user("viewer", "view_outboxevent"))

    with CaptureQueriesContext(connection) as queries:
        response = client.get(EVENTS, {"topic": "orders.shipped", "o": "1"})

    assert [e.pk for e in response.context["cl"].result_list] == [shipped.pk]
    assert not any("DISTINCT" in q["sql"].upper() for q in queries.captured_queries)
    html = response.content.decode()
    assert 'name="topic" value="orders.shipped"' in html
    # The other parameters ride along in the filter's form; an emptied box means "any".
    assert '<input type="hidden" name="o" value="1">' in html
    assert len(client.get(EVENTS, {"topic": ""}).context["cl"].result_list) == 2


def test_scheduled_events_are_shown_and_filtered_apart_from_pending_ones() -> None:
    pending = make_event(Status.PENDING, processed_ago=None)
    scheduled = make_event(Status.PENDING, processed_ago=None)
    due = make_event(Status.PENDING, processed_ago=None)
    done = make_event(Status.DONE, error=None)
    now = timezone.now()
    OutboxEvent.objects.filter(pk=scheduled.pk).update(next_retry_at=now + dt.timedelta(hours=3))
    OutboxEvent.objects.filter(pk=due.pk).update(next_retry_at=now - dt.timedelta(minutes=1))
    client = client_for(staff_user("viewer", "view_outboxevent"))

    def listed(status: str) -> list[int]:
        return sorted(e.pk for e in client.get(EVENTS, {"status": status})
                      .context["cl"].result_list)

    assert listed("scheduled") == [scheduled.pk]
    assert listed(str(Status.PENDING.value)) == sorted([pending.pk, due.pk])
    assert listed(str(Status.DONE.value)) == [done.pk]
    html = unescape(client.get(EVENTS).content.decode()).replace("\xa0", " ")
    assert re.search(r"scheduled, in (2 hours, 59 minutes|3 hours)", html), html
    assert html.count('<td class="field-state">pending</td>') == 2  # the due one too


def test_claimed_lists_the_rows_of_the_batches_in_flight() -> None:
    """A claim writes nothing to its rows: the journal of batches in flight names them."""
    pending, in_flight = (make_event(Status.PENDING, processed_ago=None) for _ in range(2))
    with transaction.atomic(), connection.cursor() as cursor:
        InFlightJournal().record(cursor, "b2:admin-test", 1, [in_flight.pk])
    client = client_for(staff_user("viewer", "view_outboxevent"))
    response = client.get(EVENTS, {"status": str(Status.CLAIMED.value)})
    assert [e.pk for e in response.context["cl"].result_list] == [in_flight.pk]
    assert pending.pk != in_flight.pk


def test_no_full_count_of_the_table() -> None:
    make_event(Status.DONE, error=None, topic="a")
    make_event(Status.DONE, error=None, topic="b")
    client = client_for(staff_user("viewer", "view_outboxevent"))
    with CaptureQueriesContext(connection) as queries:
        client.get(EVENTS, {"topic": "a"})
    # mssql-django counts with COUNT_BIG(...)
    counts = [q["sql"] for q in queries.captured_queries
              if re.search(r"\bCOUNT(_BIG)?\(", q["sql"].upper())]
    # Only the filtered count the paginator needs; no second, unfiltered one.
    assert len(counts) == 1


# --- The dead events entry: grouped by error ------------------------------------------------

def test_error_groups_are_one_group_by_query_newest_first() -> None:
    for _ in range(3):
        make_event(error="broker down", processed_ago=dt.timedelta(hours=2))
    make_event(error="broker down", processed_ago=dt.timedelta(minutes=1))
    make_event(error="schema rejected", processed_ago=dt.timedelta(minutes=30))
    make_event(error=None, processed_ago=None)
    make_event(Status.FAILED, error="not dead yet")

    dead = OutboxEvent.objects.filter(status=Status.DEAD).order_by("-id")
    with CaptureQueriesContext(connection) as queries:
        groups = outbox_admin.error_groups(dead)

    assert len(queries.captured_queries) == 1
    assert "GROUP BY" in queries.captured_queries[0]["sql"].upper()
    assert [(g.error, g.count) for g in groups] == [
        ("broker down", 4), ("schema rejected", 1), (None, 1),
    ]


def test_dead_page_shows_groups_that_link_to_their_rows() -> None:
    down = [make_event(error="broker down") for _ in range(2)]
    make_event(error="schema rejected")
    long_error = "x" * 600 + " the end"
    long_one = make_event(error=long_error)
    make_event(Status.PENDING)
    client = client_for(staff_user("viewer", "view_deadoutboxevent"))

    response = client.get(DEAD)

    assert len(response.context["cl"].result_list) == 4  # dead rows only
    groups = {item["group"].error: item for item in response.context["error_groups"]}
    assert groups["broker down"]["group"].count == 2
    html = response.content.decode()
    assert 'id="error-groups"' in html and "Dead events by error" in html

    listed = client.get(groups["broker down"]["url"]).context["cl"].result_list
    assert sorted(e.pk for e in listed) == sorted(e.pk for e in down)
    # A long error is linked by its prefix, keeping the URL short.
    assert "last_error__startswith=" in groups[long_error]["url"]
    assert len(groups[long_error]["url"]) < 1000
    listed = client.get(groups[long_error]["url"]).context["cl"].result_list
    assert [e.pk for e in listed] == [long_one.pk]


def test_dead_page_query_count_does_not_grow_with_groups() -> None:
    client = client_for(staff_user("viewer", "view_deadoutboxevent"))

    def page_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(DEAD).status_code == 200
        return len(queries.captured_queries)

    make_event(error="e-0")
    few = page_queries()
    for n in range(1, 30):
        make_event(error=f"e-{n}")
    assert page_queries() == few


# --- Actions and their permissions ----------------------------------------------------------

@pytest.mark.parametrize(("codenames", "expected"), [
    (("view_deadoutboxevent",), set()),
    (("view_deadoutboxevent", "redrive_deadoutboxevent"), {"redrive_selected"}),
    (("view_deadoutboxevent", "delete_deadoutboxevent"), {"delete_selected_dead"}),
    (("view_deadoutboxevent", "redrive_deadoutboxevent", "delete_deadoutboxevent"),
     {"redrive_selected", "delete_selected_dead"}),
    # The concrete model's permissions do not reach the dead entry's actions.
    (("view_deadoutboxevent", "delete_outboxevent", "change_outboxevent"), set()),
])
def test_each_action_needs_its_own_permission(
    codenames: tuple[str, ...], expected: set[str]
) -> None:
    make_event()
    response = client_for(staff_user("someone", *codenames)).get(DEAD)
    assert action_names(response) == expected
    html = response.content.decode()
    assert ('value="redrive_selected"' in html) is ("redrive_selected" in expected)
    # Django's own bulk delete, which would not re-check the status, is never offered.
    assert 'value="delete_selected"' not in html


def test_actions_refused_without_permission_change_nothing() -> None:
    event = make_event()
    client = client_for(staff_user("viewer", "view_deadoutboxevent"))
    for action in ("redrive_selected", "delete_selected_dead"):
        post_action(client, action, [event.pk], confirm=True)
    event.refresh_from_db()
    assert event.status == Status.DEAD


def test_redrive_confirms_then_moves_rows_back_to_pending() -> None:
    chosen = [make_event(error="broker down"), make_event(error="broker down")]
    other = make_event()
    client = client_for(staff_user("operator", "view_deadoutboxevent", "redrive_deadoutboxevent"))
    ids = [e.pk for e in chosen]

    confirmation = post_action(client, "redrive_selected", ids, confirm=False)
    assert confirmation.status_code == 200
    html = confirmation.content.decode()
    assert "2 dead events will go back to pending" in html
    assert all(f"<td>{e.aggregate_type}/{e.aggregate_id}</td>" in html for e in chosen)
    assert OutboxEvent.objects.filter(pk__in=ids, status=Status.DEAD).count() == 2

    done = post_action(client, "redrive_selected", ids, confirm=True)
    assert done.status_code == 302
    assert flashed(done) == [("success", "Redrove 2 events.")]
    for event in OutboxEvent.objects.filter(pk__in=ids):
        assert (event.status, event.attempts, event.last_error, event.next_retry_at) == (
            Status.PENDING, 0, None, None)
    other.refresh_from_db()
    assert other.status == Status.DEAD


def test_redrive_message_is_singular_for_one_and_reports_rows_no_longer_dead() -> None:
    one, gone = make_event(), make_event()
    client = client_for(staff_user("operator", "view_deadoutboxevent", "redrive_deadoutboxevent"))
    assert flashed(post_action(client, "redrive_selected", [one.pk], confirm=True)) == [
        ("success", "Redrove 1 event.")]
    # Another operator redrove this one between the confirmation page and the click.
    confirmation = post_action(client, "redrive_selected", [gone.pk], confirm=False)
    assert confirmation.status_code == 200
    OutboxEvent.objects.filter(pk=gone.pk).update(status=Status.PENDING)
    response = post_action(client, "redrive_selected", [gone.pk], confirm=True)
    assert response.status_code == 302
    assert flashed(response) == [
        ("warning", "None of the selected events is dead any more; nothing was changed.")]


def test_redrive_goes_through_the_shared_operation(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[tuple[int, ...], bool]] = []
    real = admin_actions.redrive

    def spy(selection: Any, **kwargs: Any) -> Any:
        calls.append((tuple(selection.ids), kwargs.get("dry_run", False)))
        return real(selection, **kwargs)

    monkeypatch.setattr(admin_actions, "redrive", spy)
    event = make_event()
    client = client_for(staff_user("operator", "view_deadoutboxevent", "redrive_deadoutboxevent"))
    post_action(client, "redrive_selected", [event.pk], confirm=False)
    post_action(client, "redrive_selected", [event.pk], confirm=True)
    assert calls == [((event.pk,), True), ((event.pk,), False)]


def test_delete_confirms_then_deletes_only_dead_rows() -> None:
    chosen = [make_event(), make_event(), make_event()]
    keep = make_event()
    client = client_for(staff_user("operator", "view_deadoutboxevent", "delete_deadoutboxevent"))
    ids = [e.pk for e in chosen]

    confirmation = post_action(client, "delete_selected_dead", ids, confirm=False)
    assert "3 dead events will be deleted for good." in confirmation.content.decode()
    assert OutboxEvent.objects.filter(pk__in=ids).count() == 3

    # One of them is redriven meanwhile: the DELETE's own status condition spares it.
    OutboxEvent.objects.filter(pk=ids[0]).update(status=Status.PENDING)
    done = client.post(DEAD, {"action": "delete_selected_dead", "post": "yes",
                              "_selected_action": [str(i) for i in ids]})
    assert done.status_code == 302
    assert flashed(done) == [("success", "Deleted 2 dead events.")]
    assert set(OutboxEvent.objects.values_list("pk", flat=True)) == {ids[0], keep.pk}


def test_single_row_delete_page_is_fenced_on_status() -> None:
    event = make_event()
    client = client_for(staff_user("operator", "view_deadoutboxevent", "delete_deadoutboxevent"))
    url = reverse("admin:eventferry_django_deadoutboxevent_delete", args=[event.pk])
    assert client.get(url).status_code == 200
    assert client.post(url, {"post": "yes"}).status_code == 302
    assert not OutboxEvent.objects.filter(pk=event.pk).exists()


def test_too_big_a_selection_is_refused_with_advice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admin_actions, "MAX_ACTION_ROWS", 2)
    events = [make_event() for _ in range(3)]
    client = client_for(staff_user("operator", "view_deadoutboxevent", "redrive_deadoutboxevent"))
    response = client.post(DEAD, {"action": "redrive_selected", "index": "0", "select_across": "1",
                                  "_selected_action": [str(events[0].pk)]})
    assert response.status_code == 302
    [(level, text)] = flashed(response)
    assert level == "warning" and "at most 2 events" in text and "outbox_redrive" in text
    assert OutboxEvent.objects.filter(status=Status.DEAD).count() == 3


def test_select_across_redrives_the_filtered_dead_rows() -> None:
    down = [make_event(error="broker down") for _ in range(2)]
    other = make_event(error="schema rejected")
    client = client_for(staff_user("operator", "view_deadoutboxevent", "redrive_deadoutboxevent"))
    url = f"{DEAD}?last_error=broker+down"
    confirmation = client.post(url, {"action": "redrive_selected", "index": "0",
                                     "select_across": "1", "_selected_action": [str(down[0].pk)]})
    html = confirmation.content.decode()
    assert "2 dead events will go back to pending" in html
    ids = sorted(int(i) for i in re.findall(r'name="_selected_action" value="(\d+)"', html))
    assert ids == sorted(e.pk for e in down)
    assert flashed(post_action(client, "redrive_selected", ids, confirm=True, url=url)) == [
        ("success", "Redrove 2 events.")]
    assert OutboxEvent.objects.get(pk=other.pk).status == Status.DEAD


def test_proxy_permissions_exist_with_clear_names() -> None:
    names = dict(Permission.objects.filter(content_type__model="deadoutboxevent")
                 .values_list("codename", "name"))
    assert names["redrive_deadoutboxevent"] == "Can redrive dead outbox events"
    assert {"view_deadoutboxevent", "delete_deadoutboxevent"} <= set(names)
    assert DeadOutboxEvent._meta.proxy


# --- The inbox entry: read-only, found by exact message id ---------------------------------

INBOX = reverse("admin:eventferry_django_inboxmessage_changelist")


def test_inbox_records_are_listed_read_only_and_found_by_message_id() -> None:
    for n, consumer in enumerate(["shipping", "billing", "shipping"]):
        InboxMessage.objects.create(consumer=consumer, message_id=f"msg-{n}")
    root = User.objects.create_superuser("root", password="secret-pass-123",
                                         last_login=LAST_LOGIN())
    client = client_for(root)

    listing = client.get(INBOX)
    assert listing.status_code == 200
    assert [m.message_id for m in listing.context["cl"].result_list] == ["msg-2", "msg-1",
                                                                       "msg-0"]
    assert action_names(listing) == set()  # no bulk delete: a redelivery would run again
    found = client.get(INBOX, {"q": "msg-1"}).context["cl"].result_list
    assert [(m.consumer, m.message_id) for m in found] == [("billing", "msg-1")]
    assert list(client.get(INBOX, {"q": "msg"}).context["cl"].result_list) == []
    shipping = client.get(INBOX, {"consumer": "shipping"}).context["cl"].result_list
    assert {m.message_id for m in shipping} == {"msg-0", "msg-2"}

    record = InboxMessage.objects.get(message_id="msg-0")
    assert client.get(reverse("admin:eventferry_django_inboxmessage_add")).status_code == 403
    assert client.get(reverse("admin:eventferry_django_inboxmessage_delete",
                              args=[record.pk])).status_code == 403
    assert client.post(change_url("inboxmessage", record.pk),
                       {"consumer": "x"}).status_code == 403
    record.refresh_from_db()
    assert record.consumer == "shipping"


# --- Admin history (LogEntry), as Django's own actions write it ------------------------------

def history(*flags: int) -> list[tuple[str, int, str, str]]:
    from django.contrib.admin.models import LogEntry

    entries = LogEntry.objects.filter(action_flag__in=flags).order_by("id")
    return [(e.object_id, e.action_flag, e.user.username, e.change_message) for e in entries]


def test_redrive_writes_a_change_entry_per_redriven_row() -> None:
    from django.contrib.admin.models import CHANGE
    from django.contrib.contenttypes.models import ContentType

    chosen = [make_event(error="broker down"), make_event(error="406 PRECONDITION_FAILED")]
    gone = make_event()
    client = client_for(staff_user("operator", "view_deadoutboxevent", "redrive_deadoutboxevent"))
    ids = [e.pk for e in [*chosen, gone]]
    OutboxEvent.objects.filter(pk=gone.pk).update(status=Status.PENDING)  # redriven meanwhile

    post_action(client, "redrive_selected", ids, confirm=True)

    assert history(CHANGE) == [
        (str(chosen[0].pk), CHANGE, "operator",
         "Redriven: back to pending after 5 attempt(s); last error: broker down"),
        (str(chosen[1].pk), CHANGE, "operator",
         "Redriven: back to pending after 5 attempt(s); last error: 406 PRECONDITION_FAILED"),
    ]
    from django.contrib.admin.models import LogEntry

    entry = LogEntry.objects.order_by("id").first()
    assert entry is not None
    assert entry.content_type == ContentType.objects.get_for_model(DeadOutboxEvent,
                                                                   for_concrete_model=False)
    assert entry.get_admin_url() == change_url("deadoutboxevent", chosen[0].pk)


def test_delete_writes_a_deletion_entry_per_deleted_row() -> None:
    from django.contrib.admin.models import DELETION

    chosen = [make_event(), make_event()]
    spared = make_event()
    client = client_for(staff_user("operator", "view_deadoutboxevent", "delete_deadoutboxevent"))
    OutboxEvent.objects.filter(pk=spared.pk).update(status=Status.PENDING)

    post_action(client, "delete_selected_dead", [e.pk for e in [*chosen, spared]], confirm=True)

    assert [(object_id, flag, user) for object_id, flag, user, _ in history(DELETION)] == [
        (str(e.pk), DELETION, "operator") for e in chosen]
    assert OutboxEvent.objects.filter(pk=spared.pk).exists()
    # The single-row delete page goes through Django's own view, which logs the same way.
    last = make_event()
    client.post(reverse("admin:eventferry_django_deadoutboxevent_delete", args=[last.pk]),
                {"post": "yes"})
    assert [object_id for object_id, *_ in history(DELETION)][-1] == str(last.pk)


def test_a_refused_or_unconfirmed_action_writes_no_history() -> None:
    from django.contrib.admin.models import LogEntry

    event = make_event()
    viewer = client_for(staff_user("viewer", "view_deadoutboxevent"))
    post_action(viewer, "redrive_selected", [event.pk], confirm=True)
    operator = client_for(staff_user("operator", "view_deadoutboxevent",
                                     "redrive_deadoutboxevent", "delete_deadoutboxevent"))
    post_action(operator, "redrive_selected", [event.pk], confirm=False)
    post_action(operator, "delete_selected_dead", [event.pk], confirm=False)
    assert not LogEntry.objects.exists()
