def test_list_is_empty_envelope(client, tenant):
    response = client.get("/v1/api/calendar/bookings", headers=tenant.headers())
    assert response.status_code == 200
    assert response.json == {"bookings": [], "total": 0, "limit": 50, "offset": 0}
